import sys

from scrtune.cli.main import main

sys.exit(main())
