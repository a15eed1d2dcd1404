"""report: a run folder's HDF5 files → index.html, report.md and PNG plots.

  common  names, errors, messages, number formatting, the model's architecture
  load    reading and checking the files, each in a sandboxed child process
  plots   the PNGs (matplotlib)
  render  tables, summary cards, the HTML and Markdown documents
  cli     options, the order of work, the atomically replaced output folder

tools/report.py is the program; `make` packs it with this package into build/bin/report.
"""
