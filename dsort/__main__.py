import sys

from dsort.cli import main

sys.exit(main())
