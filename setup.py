"""Only the optional C fast paths live here; all metadata is in setup.cfg.

`optional=True`: where no C compiler is available scrtune installs and runs on its pure-Python
parser (slower, same results).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("scrtune.events._fastparse", ["scrtune/events/_fastparse.c"],
                  depends=["scrtune/events/_iodigest.h"], optional=True),
        Extension("scrtune.engine._fastagg", ["scrtune/engine/_fastagg.c"],
                  depends=["scrtune/engine/_summary_parts.h", "scrtune/engine/_placement.h",
                           "scrtune/engine/_held.h", "scrtune/engine/_gather.h",
                           "scrtune/engine/_sums.h", "scrtune/engine/_pytables.h"],
                  optional=True),
        Extension("scrtune.probe._rsloop", ["scrtune/probe/_rsloop.c"], optional=True),
    ]
)
