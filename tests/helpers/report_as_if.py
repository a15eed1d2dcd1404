"""Runs the report as if this machine had N CPUs: report_as_if.py N REPORT [report options].

REPORT is the report's zip archive (build/bin/report) or tools/report.py. The report picks
how it reads and draws by its CPU count (report_lib.parallel.workers: one reading child and
figures in children from SERIAL_BELOW CPUs, all in the report itself below), so a 2-core
test machine runs the many-CPU path only through this."""
import os
import sys

cpus, report = int(sys.argv[1]), sys.argv[2]
sys.path.insert(0, report if os.path.isfile(report) and not report.endswith(".py") else os.path.dirname(report))
from report_lib import parallel  # noqa: E402

parallel.workers = lambda: cpus
from report_lib.cli import main  # noqa: E402

sys.argv = [report] + sys.argv[3:]
sys.exit(main(sys.argv[1:]))
