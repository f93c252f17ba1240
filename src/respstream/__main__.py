import sys

from respstream.cli import main

sys.exit(main())
