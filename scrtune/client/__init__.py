"""What runs inside the application: bounded requests to the node's daemon, event emission.

Nothing here may hang or crash the training job: requests time out and return None (keep the
current settings), and emitted events are dropped, and counted, when the daemon cannot keep up.
"""

from scrtune.client.connection import DaemonClient
from scrtune.client.emit import Emitter, emit, emit_flush
from scrtune.client.tuned_scr import TunedSCR

__all__ = ["DaemonClient", "Emitter", "TunedSCR", "emit", "emit_flush"]
