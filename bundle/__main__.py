import sys

from bundle.cli import main

sys.exit(main())
