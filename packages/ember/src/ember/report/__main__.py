import sys

from ember.report.cli import main

sys.exit(main())
