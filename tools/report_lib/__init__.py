"""report: a run folder's HDF5 files → index.html, report.md and PNG plots.

  common    names, errors, messages, number formatting, the model's architecture
  load      reading and checking the files, each in a sandboxed child process
  parallel  forked children: the sandboxed readers, the figures, the inputs' sha256
  dataset   which dataset a run was trained on, in a reader's words
  escape    one escaping function per output syntax for strings from outside
  plots     the PNGs (matplotlib)
  pictures  the grid of test images with their predicted and true classes
  render    tables, summary cards, the HTML and Markdown documents
  compare   report --compare: one table and plot over several run folders
  info      report --info: a text summary of any file of this toolkit
  cli       options, the order of work, the atomically replaced output folder
  interpreter  the Python that runs the report: this one, or one with h5py and matplotlib

tools/report.py is the program; `make` packs it with this package into build/bin/report.
"""
