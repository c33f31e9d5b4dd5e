import sys

from servesim.cli import main

sys.exit(main())
