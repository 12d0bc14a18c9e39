"""Only the optional C fast path lives here; all metadata is in setup.cfg.

`optional=True`: where no C compiler is available scrtune installs and runs on its pure-Python
parser (slower, same results).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("scrtune.events._fastparse", ["scrtune/events/_fastparse.c"], optional=True)
    ]
)
