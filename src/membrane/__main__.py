import sys

from membrane.cli import main

sys.exit(main())
