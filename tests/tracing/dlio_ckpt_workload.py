"""DLIO's checkpoint workload, region for region, traced with the real DFTracer.

dlio_benchmark's `DLIOBenchmark._checkpoint` (category `dlio_benchmark`) runs
`_checkpoint_write`: for each checkpoint, compute (`framework.compute`), then
`PyTorchCheckpointing.save_checkpoint` (category `checkpoint`), whose tensors come from
`get_tensor_core` helper regions and are written with `torch.save` (buffered writes of mixed
sizes). Then `_checkpoint_read` loads each back in `load_checkpoint`. DLIO 2.0 names the save
`PyTorchCheckpointing.checkpoint`, around one `save_state` per saved object (`--dlio-2`).
Region names, categories and nesting follow dlio_benchmark's source; the I/O is real.
"""

from __future__ import annotations

import argparse
import os
import time

from dftracer.python import dft_fn, dftracer

CHUNK_BYTES = 1 << 20
HEADER_BYTES = 4096


def _save(path: str, total_bytes: int) -> None:
    """As torch.save into a zip: a small header and record names, then the tensor data."""
    with open(path, "wb") as handle:
        handle.write(b"h" * HEADER_BYTES)
        done = 0
        while done < total_bytes:
            done += handle.write(b"t" * min(CHUNK_BYTES, total_bytes - done))
        handle.write(b"z" * 512)


def _load(path: str) -> None:
    with open(path, "rb") as handle:
        while handle.read(CHUNK_BYTES):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True, help="checkpoint folder (traced)")
    parser.add_argument("--log", required=True, help="trace file prefix")
    parser.add_argument("--checkpoints", type=int, default=3)
    parser.add_argument("--model-bytes", type=int, default=8 << 20)
    parser.add_argument("--optimizer-bytes", type=int, default=16 << 20)
    parser.add_argument("--compute-s", type=float, default=0.1)
    parser.add_argument("--dlio-2", action="store_true",
                        help="DLIO 2.0 names: `checkpoint` around one `save_state` per object")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    log = dftracer.initialize_log(args.log, args.dir, -1)
    objects = {"model": args.model_bytes, "optimizer": args.optimizer_bytes}
    with dft_fn(cat="dlio_benchmark", name="DLIOBenchmark._checkpoint"):
        with dft_fn(cat="dlio_benchmark", name="DLIOBenchmark._checkpoint_write"):
            for index in range(1, args.checkpoints + 1):
                with dft_fn(cat="dlio_benchmark", name="TorchFramework.compute"):
                    time.sleep(args.compute_s)
                _save_checkpoint(args, index, objects)
        with dft_fn(cat="dlio_benchmark", name="DLIOBenchmark._checkpoint_read"):
            for index in range(1, args.checkpoints + 1):
                with dft_fn(cat="checkpoint", name="PyTorchCheckpointing.load_checkpoint",
                            epoch=1, step=index):
                    for name in objects:
                        _load(os.path.join(args.dir, f"global_epoch1_step{index}-{name}.pt"))
    log.finalize()


def _save_checkpoint(args: argparse.Namespace, index: int, objects: dict[str, int]) -> None:
    outer = "PyTorchCheckpointing.checkpoint" if args.dlio_2 else \
        "PyTorchCheckpointing.save_checkpoint"
    with dft_fn(cat="checkpoint", name=outer, epoch=1, step=index):
        for name, size in objects.items():
            with dft_fn(cat="checkpoint", name="PyTorchCheckpointing.get_tensor_core"):
                pass
            path = os.path.join(args.dir, f"global_epoch1_step{index}-{name}.pt")
            if args.dlio_2:
                with dft_fn(cat="checkpoint", name="PyTorchCheckpointing.save_state"):
                    _save(path, size)
            else:
                _save(path, size)


if __name__ == "__main__":
    main()
