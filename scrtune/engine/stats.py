"""The engine's statistics: fed batch by batch, mergeable exactly, serialisable without pickle.

`Stats.add(batch)` folds one EventBatch in (vectorised per batch, a Python loop only per
process and per checkpoint region); `Stats.merge(other)` combines statistics built from other
files or on other MPI ranks, giving what one `Stats` fed with everything would hold.
"""

from __future__ import annotations

import itertools

import msgspec
import numpy as np

from scrtune.engine import aggregated, classify
from scrtune.engine.classify import CheckpointPatterns, RegionKind
from scrtune.engine.held import adopt_held
from scrtune.engine.ioagg import CallTable, Rows
from scrtune.engine.regions import region_sums, save_windows
from scrtune.engine.retire import LISTED_WINDOWS, Retired, bound
from scrtune.engine.state import STATE_VERSION, Counts, SourceReport, StatsState, saturated
from scrtune.engine.timeline import DEFAULT_HORIZON_US, Timeline, Window
from scrtune.events.digest import KEY_COLUMNS, digest_rows, sums_by_key
from scrtune.events.model import EventBatch, HashDef, Phase, ProcessFact

# with Stats.max_processes (the daemon): distinct call names and files kept per process
# followed; past them, new ones are counted under one name
MAX_NAMES_PER_PROCESS = 1
MAX_FILES_PER_PROCESS = 64
OVERFLOW = "(more)"
_ENCODER = msgspec.msgpack.Encoder()


def _saturated(state: StatsState) -> object:
    return saturated(msgspec.to_builtins(state, builtin_types=(bytes, bytearray, memoryview)))


def _add_into(table: dict, key: object, values: list[int]) -> None:
    slot = table.get(key)
    if slot is None:
        table[key] = list(values)
    else:
        for i, v in enumerate(values):
            slot[i] += v


def _identity(codes: np.ndarray, size: int) -> bool:
    """Whether a state's codes are ours: its strings are all of ours, in our order."""
    return len(codes) == size and bool((codes == np.arange(size)).all())


def _process_groups(host: np.ndarray, pid: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The distinct (host code, pid) pairs of the rows, and each row's index among them."""
    if (host == host[0]).all() and (pid == pid[0]).all():  # the usual case: one process
        return [(int(host[0]), int(pid[0]))], np.zeros(len(pid), dtype=np.int64)
    if pid.min() >= 0 and pid.max() < 1 << 32:  # pack into one key: a faster unique
        packed, inverse = np.unique(((host + 1) << 32) + pid, return_inverse=True)
        return [(int(k >> 32) - 1, int(k & 0xFFFFFFFF)) for k in packed], inverse
    pairs, inverse = np.unique(np.stack([host, pid], axis=1), axis=0, return_inverse=True)
    return [(int(h), int(p)) for h, p in pairs], inverse.reshape(-1)


class Stats:
    """Statistics of one run, from any number of batches, files or ranks."""

    def __init__(
        self,
        patterns: CheckpointPatterns | None = None,
        horizon_us: int = DEFAULT_HORIZON_US,
        max_processes: int | None = None,
        listed_windows: int | None = LISTED_WINDOWS,
    ) -> None:
        """`max_processes`: processes (and 16 threads each) followed one by one; the rows of
        any more are counted in the totals only. None (replay): all of them. The daemon sets
        it: what arrives on its socket must not grow its memory without bound.
        `listed_windows`: checkpoint windows kept, the latest (engine/retire.py); None: all."""
        self.patterns = patterns or CheckpointPatterns()
        self.horizon_us = horizon_us
        self.max_processes = max_processes
        self.listed_windows = listed_windows
        self.retired = Retired()
        self._held = 0  # windows in the timelines
        self.counts = Counts()
        self.sources: list[SourceReport] = []
        self.hash_names: dict[str, str] = {}  # FH/SH hash -> path or string
        self.host_names: dict[str, str] = {}  # HH hash -> host name
        self.ops: dict[str, list[int]] = {}  # I/O call -> [calls, dur_us, bytes]
        self.file_io: dict[str, list[int]] = {}  # file key -> [written, write_us, read, read_us]
        # file key -> call size (negative for reads) -> [calls, dur_us]: the cost model's input
        self.call_costs: dict[str, dict[int, list[int]]] = {}
        self.regions: dict[str, list[int]] = {}  # "cat/name" -> [count, dur_us]
        self.aggregated_regions: dict[str, list[int]] = {}  # aggregated.key -> [calls, dur_us]
        self.compute = [0, 0]  # compute regions: [count, dur_us]
        self.threads: set[tuple[str, int, int]] = set()
        self.span = [0, 0]  # [first ts_us, last end_us]; 0 while nothing timed was seen
        self.facts: list[ProcessFact] = []
        self.cpu_counters: set[str] = set()
        self.fork_processes: set[tuple[str, int]] = set()
        self.timelines: dict[tuple[str, int], Timeline] = {}
        self._names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self._files: list[str] = []
        self._file_ids: dict[str, int] = {}
        self._is_write = np.zeros(0, dtype=bool)
        self._is_read = np.zeros(0, dtype=bool)
        self._kinds: dict[tuple[str, str], RegionKind | None] = {}

    # -- string tables -------------------------------------------------------------------
    def _name_map(self, names: list[str]) -> np.ndarray:
        ids = self._name_ids
        for name in names:
            if name not in ids:
                self._intern(ids, self._names, name, MAX_NAMES_PER_PROCESS)
        if len(self._is_write) != len(self._names):
            self._is_write = np.array([classify.is_write(n) for n in self._names], dtype=bool)
            self._is_read = np.array([classify.is_read(n) for n in self._names], dtype=bool)
        return np.array([ids[n] for n in names], dtype=np.int64)

    def _file_map(self, files: list[str]) -> np.ndarray:
        ids = self._file_ids
        for key in files:
            if key not in ids:
                self._intern(ids, self._files, key, MAX_FILES_PER_PROCESS)
        return np.array([ids[k] for k in files] + [-1], dtype=np.int64)  # [-1] maps UNKNOWN

    def _intern(self, ids: dict[str, int], table: list[str], key: str,
                per_process: int) -> None:
        """A code for `key`: its own, or past the daemon's bound the one of OVERFLOW."""
        if self._full(len(table), per_process):
            key_id = ids.get(OVERFLOW)
            if key_id is None:
                key_id = ids[OVERFLOW] = len(table)
                table.append(OVERFLOW)
            ids[key] = key_id
            return
        ids[key] = len(table)
        table.append(key)

    def _full(self, count: int, per_process: int) -> bool:
        """Past the daemon's bound (max_processes x per_process), new names share one."""
        return self.max_processes is not None and count >= per_process * self.max_processes

    def table(self) -> CallTable:
        return CallTable(self._names, self._files, self._is_write, self._is_read)

    # -- feeding ---------------------------------------------------------------------------
    def add_source(self, report: SourceReport) -> None:
        self.sources.append(report)

    def add(self, batch: EventBatch, fork: bool = False) -> None:
        self.counts.records += batch.records
        self.counts.invalid_lines += batch.invalid_lines
        self._metadata(batch.hash_defs, batch.process_facts)
        if not len(batch):
            return
        cols = batch.columns
        phase = cols["phase"]
        self.counts.metadata += batch.records - len(batch)
        self.counts.counter += int((phase == Phase.COUNTER).sum())
        self.counts.complete += int((phase == Phase.COMPLETE).sum())
        folded = phase == Phase.AGGREGATED
        self.counts.aggregated += int(folded.sum())
        name_map, file_map = self._name_map(batch.names), self._file_map(batch.files)
        io_cat = np.array([classify.is_io_call(0, c) for c in batch.cats] + [False], dtype=bool)
        tracer_cat = np.array([c == classify.TRACER_CATEGORY for c in batch.cats] + [False])
        io = (cols["layer"] == classify.IO_LAYER) | io_cat[cols["cat"]]
        complete = phase == Phase.COMPLETE
        region_rows = ~io & complete & ~tracer_cat[cols["cat"]]
        if folded.any():  # most traces have none: skip the masks
            calls, dur_us = aggregated.add(self.aggregated_regions, batch, self.patterns,
                                           self._region_kind,
                                           folded & ~io & ~tracer_cat[cols["cat"]])
            self.compute = [self.compute[0] + calls, self.compute[1] + dur_us]
        if (phase == Phase.COUNTER).any():
            counter_names = {
                batch.names[c] for c in np.unique(cols["name"][phase == Phase.COUNTER])
            }
            self.cpu_counters.update(n for n in counter_names if n.startswith("cpu-"))
        digest = batch.digest if batch.digest is not None else digest_rows(cols)
        if digest.complete_rows:
            first, last = digest.first_ts_us, digest.last_end_us
            self.span = [
                first if not self.span[0] else min(self.span[0], first),
                max(self.span[1], last),
            ]
            self._threads(batch.hosts, digest.threads)
        self._io_tables(digest.entries, io_cat, name_map, file_map)
        self._processes(batch, name_map, file_map, io & complete, region_rows, fork)

    def _metadata(self, hash_defs: list[HashDef], facts: list[ProcessFact]) -> None:
        for item in hash_defs:
            table = self.host_names if item.kind == "HH" else self.hash_names
            if item.key in table or not self._full(len(table), MAX_FILES_PER_PROCESS):
                table[item.key] = item.value
        if self.max_processes is not None:
            facts = facts[:max(0, 4 * self.max_processes - len(self.facts))]
        self.facts.extend(f for f in facts if f not in self.facts)

    def _threads(self, hosts: list[str], threads: np.ndarray) -> None:
        """Threads seen: (host, pid, tid) rows of a digest, in their sorted order (what a
        bound keeps is then the same whichever parser read them)."""
        triples = sorted(set(map(tuple, threads.tolist())))  # a few: faster than np.unique
        found = ((hosts[h] if h >= 0 else "", p, t) for h, p, t in triples)
        if self.max_processes is None:
            self.threads.update(found)
            return
        room = 16 * self.max_processes - len(self.threads)
        self.threads.update(itertools.islice(found, max(room, 0)))

    def _io_tables(self, entries: np.ndarray, io_cat: np.ndarray, name_map: np.ndarray,
                   file_map: np.ndarray) -> None:
        """Calls, bytes and time per operation and per file, and call costs per size, from a
        digest's entries (a few hundred a batch, not a row each). `file_map` ends with -1,
        for files the rows do not name."""
        keys = {name: entries[:, i] for i, name in enumerate(KEY_COLUMNS)}
        io = (keys["layer"] == classify.IO_LAYER) | io_cat[keys["cat"]]
        if not io.any():
            return
        phase, size, host = keys["phase"][io], keys["size_bytes"][io], keys["host"][io]
        rows, calls, dur = (entries[io, len(KEY_COLUMNS) + i] for i in range(3))
        gid, gfile = name_map[keys["name"][io]], file_map[keys["file"][io]]
        self.counts.io_calls += int(calls.sum())
        self.counts.io_calls_without_args += int(
            calls[(keys["file"][io] < 0) & (size < 0) & (host < 0)].sum())
        moved = np.maximum(size, 0) * rows
        for name, *sums in sums_by_key(gid[:, None], np.stack([calls, dur, moved], 1)).tolist():
            if sums[0]:
                _add_into(self.ops, self._names[name], sums)
        data = (phase == Phase.COMPLETE) & (size >= 0) & (gfile >= 0)
        if not data.any():
            return
        gid, gfile, moved, rows, dur = gid[data], gfile[data], moved[data], rows[data], dur[data]
        write, read = self._is_write[gid], self._is_read[gid]
        per_file = np.stack([moved * write, dur * write, moved * read, dur * read], 1)
        for file, *sums in sums_by_key(gfile[:, None], per_file).tolist():
            _add_into(self.file_io, self._files[file], sums)
        signed = np.where(read, -size[data], size[data])
        sane = np.abs(signed) < 1 << 41  # a call beyond 2 TiB is no cost-model input
        pairs = np.stack([gfile[sane], signed[sane]], 1)
        for file, call_size, *sums in sums_by_key(pairs, np.stack([rows, dur], 1)[sane]).tolist():
            _add_into(self.call_costs.setdefault(self._files[file], {}), call_size, sums)

    def _processes(self, batch: EventBatch, name_map: np.ndarray, file_map: np.ndarray,
                   io_rows: np.ndarray, region_rows: np.ndarray, fork: bool) -> None:
        """Each process's I/O rows (names and files in the global tables) and checkpoint
        windows, into its timeline."""
        cols = batch.columns
        active = io_rows | region_rows
        if not active.any():
            return
        host_codes, pids = cols["host"], cols["pid"]
        if (host_codes == host_codes[0]).all() and (pids == pids[0]).all():
            # the usual case, one process: its rows are found without gathering columns
            keys, inverse, positions = [(int(host_codes[0]), int(pids[0]))], None, None
        else:
            positions = np.flatnonzero(active)
            keys, inverse = _process_groups(host_codes[positions], pids[positions])
        table = None
        for index, (host_code, pid) in enumerate(keys):
            at = None if positions is None else positions[inverse == index]
            host = batch.hosts[host_code] if host_code >= 0 else ""
            timeline = self.timelines.get((host, pid))
            if timeline is None:
                if self.max_processes is not None and \
                        len(self.timelines) >= self.max_processes:
                    self.counts.untracked_rows += int(active.sum()) if at is None else len(at)
                    continue
                timeline = self.timelines[(host, pid)] = Timeline(host=host, pid=pid)
            windows = self._windows(batch, np.flatnonzero(region_rows) if at is None
                                    else at[region_rows[at]])
            io_at = np.flatnonzero(io_rows) if at is None else at[io_rows[at]]
            rows = Rows.gather(cols, io_at, name_map, file_map)
            if fork:
                self.fork_processes.add((host, pid))
            table = table or self.table()
            before = len(timeline.windows)
            timeline.add(rows, windows, table, self.horizon_us)
            self._held += len(timeline.windows) - before
        self._held = bound(self.timelines, self.retired, self.listed_windows, self._held)

    def _region_kind(self, cat: str, name: str) -> RegionKind | None:
        kind = self._kinds.get((cat, name), False)
        if kind is False:
            kind = self._kinds[(cat, name)] = classify.checkpoint_region_kind(
                name, cat, self.patterns)
        return kind  # type: ignore[return-value]

    def _windows(self, batch: EventBatch, at: np.ndarray) -> list[Window]:
        if not len(at):
            return []
        cols = batch.columns
        self.counts.regions += len(at)
        width = len(batch.names) + 1
        pair = cols["cat"][at] * width + cols["name"][at]
        keys, counts, durs = region_sums(pair, cols["dur_us"][at])
        marks: dict[int, tuple[str, str, bool]] = {}  # region key -> kind, name, by name only
        for key, count, dur in zip(keys.tolist(), counts.tolist(), durs.tolist()):
            cat_code, name_code = divmod(key, width)
            cat, name = batch.cats[cat_code], batch.names[name_code]
            _add_into(self.regions, f"{cat}/{name}", [count, int(dur)])
            if classify.is_compute_region(name, cat):
                self.compute[0] += count
                self.compute[1] += int(dur)
            kind = self._region_kind(cat, name)
            if kind in (RegionKind.SAVE, RegionKind.RESTORE):
                marks[key] = (kind.value, name,
                              not classify.marked_by_category(cat, self.patterns))
        return save_windows(cols, at, pair, marks) if marks else []

    # -- merging and serialising ---------------------------------------------------------------
    def merge(self, other: Stats) -> None:
        """Fold in statistics built elsewhere (other files, other ranks)."""
        self.merge_state(other.state())

    def merge_state(self, state: StatsState) -> None:
        """Fold in a state: its tables added to ours, its timelines' rows recoded to our names."""
        if state.version != STATE_VERSION:
            raise ValueError(f"statistics state version {state.version}, expected {STATE_VERSION}")
        self.counts.add(state.counts)
        self.sources.extend(state.sources)
        self.hash_names.update(state.hash_names)
        self.host_names.update(state.host_names)
        for table, incoming in (
            (self.ops, state.ops),
            (self.file_io, state.file_io),
            (self.regions, state.regions),
            (self.aggregated_regions, state.aggregated_regions),
        ):
            for key, values in incoming.items():
                _add_into(table, key, values)
        for file_key, sizes in state.call_costs.items():
            mine = self.call_costs.setdefault(file_key, {})
            for size, values in sizes.items():
                _add_into(mine, size, values)
        self.compute = [a + b for a, b in zip(self.compute, state.compute)]
        self.threads.update(tuple(t) for t in state.threads)
        if state.span[1]:
            first = state.span[0] if not self.span[0] else min(self.span[0], state.span[0])
            self.span = [first, max(self.span[1], state.span[1])]
        self.facts.extend(f for f in state.facts if f not in self.facts)
        self.cpu_counters.update(state.cpu_counters)
        self.fork_processes.update(tuple(p) for p in state.fork_processes)
        self.retired.add(state.retired)
        self._merge_timelines(state)

    def _merge_timelines(self, state: StatsState) -> None:
        name_map = self._name_map(state.names)
        file_map = self._file_map(state.files)
        table = self.table()
        # held rows coded as ours keep our tables (a daemon restoring its snapshot): nothing
        # to settle before they are encoded or folded into again
        same_codes = _identity(name_map, len(self._names)) and \
            _identity(file_map[:-1], len(self._files))
        held_tables = (self._names, self._files) if same_codes else (state.names, state.files)
        for incoming in state.timelines:
            rows = Rows.from_wire(incoming.pending)
            rows.name = name_map[rows.name] if len(rows) else rows.name
            rows.file = file_map[rows.file] if len(rows) else rows.file
            key = (incoming.host, incoming.pid)
            mine = self.timelines.get(key)
            if mine is None:
                mine = self.timelines[key] = Timeline(host=incoming.host, pid=incoming.pid)
            for file_key, uses in incoming.clusters.items():
                mine.clusters.setdefault(file_key, []).extend(uses)
            mine.newest_us = max(mine.newest_us, incoming.newest_us)
            mine.seen_at(incoming.oldest_us)
            mine.retired += incoming.retired
            adopt_held([window.io for window in incoming.windows], *held_tables)
            before = len(mine.windows)
            mine.add(rows, incoming.windows, table, self.horizon_us)
            self._held = bound(self.timelines, self.retired, self.listed_windows,
                               self._held + len(mine.windows) - before)

    def state(self) -> StatsState:
        return StatsState(
            version=STATE_VERSION,
            counts=self.counts,
            sources=self.sources,
            hash_names=self.hash_names,
            host_names=self.host_names,
            ops=self.ops,
            file_io=self.file_io,
            call_costs=self.call_costs,
            regions=self.regions,
            aggregated_regions=self.aggregated_regions,
            compute=self.compute,
            threads=sorted(self.threads),
            span=self.span,
            facts=self.facts,
            cpu_counters=sorted(self.cpu_counters),
            fork_processes=sorted(self.fork_processes),
            names=self._names,
            files=self._files,
            timelines=[t.state(self._names, self._files) for t in self.timelines.values()],
            retired=self.retired,
        )

    def merge_bytes(self, data: bytes) -> None:
        """Fold in statistics serialised with to_bytes() (another rank's, a snapshot)."""
        self.merge_state(msgspec.msgpack.decode(data, type=StatsState))

    def to_bytes(self) -> bytes:
        state = self.state()
        try:
            return _ENCODER.encode(state)
        except OverflowError:  # sums past int64 (absurd or hostile input): saturate them
            return _ENCODER.encode(_saturated(state))

    def encode_into(self, buffer: bytearray) -> None:
        """The state's encoding into `buffer` (replacing what it held): a daemon's snapshot
        reuses one buffer, not tens of MB allocated, grown and faulted in every time."""
        state = self.state()
        try:
            _ENCODER.encode_into(state, buffer)
        except OverflowError:
            _ENCODER.encode_into(_saturated(state), buffer)

    def copy(self) -> Stats:
        """A copy with the same settings, for `finish` to settle while this one is fed on."""
        return Stats.from_bytes(self.to_bytes(), self.patterns, self.horizon_us,
                                self.listed_windows)

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        patterns: CheckpointPatterns | None = None,
        horizon_us: int = DEFAULT_HORIZON_US,
        listed_windows: int | None = LISTED_WINDOWS,
    ) -> Stats:
        stats = cls(patterns, horizon_us, listed_windows=listed_windows)
        stats.merge_bytes(data)
        return stats
