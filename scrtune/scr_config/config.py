"""One SCR configuration and its renderings: environment, `srun --export`, config file,
`SCR_Config` strings and JSON. All of them come from the same object, and a configuration
cannot be built with anything its renderers could not express safely."""

from __future__ import annotations

import os
import re
import shlex

import msgspec

from scrtune.errors import ScrtuneError
from scrtune.scr_config.catalogue import BY_NAME, DESCRIPTORS, Effect
from scrtune.scr_config.values import check_value

TARGET_VERSION = "3.1.0"
_SAFE = re.compile(r"[A-Za-z0-9_./:@%+-]+")  # no spaces, `=`, quotes, `$`, `#` or commas


class ConfigError(ScrtuneError):
    """A configuration SCR would not read as meant."""


class Descriptor(msgspec.Struct, frozen=True):
    kind: str  # STORE, CKPT or GROUPS
    value: str
    keys: tuple[tuple[str, str], ...] = ()

    def line(self) -> str:
        return " ".join([f"{self.kind}={self.value}", *(f"{k}={v}" for k, v in self.keys)])


class ScrConfig(msgspec.Struct, frozen=True):
    """Library parameters (name -> value as SCR should read it) and descriptor lines."""

    params: tuple[tuple[str, str], ...]
    descriptors: tuple[Descriptor, ...] = ()
    target_version: str = TARGET_VERSION

    @classmethod
    def build(cls, params: dict[str, str], descriptors: tuple[Descriptor, ...] = (),
              target_version: str = TARGET_VERSION) -> ScrConfig:
        has_ckpt = any(d.kind == "CKPT" for d in descriptors)
        for name, value in params.items():
            if name == "SCR_COPY_TYPE" and value == "FILE":
                if not has_ckpt:  # FILE mode without CKPT lines aborts SCR_Init
                    raise ConfigError("SCR_COPY_TYPE=FILE needs CKPT= descriptors")
                continue
            _check_param(name, value, target_version)
        if has_ckpt and params.get("SCR_COPY_TYPE") != "FILE":
            raise ConfigError("CKPT= descriptors are used only with SCR_COPY_TYPE=FILE")
        for descriptor in descriptors:
            _check_descriptor(descriptor)
        return cls(tuple(params.items()), tuple(descriptors), target_version)

    @classmethod
    def from_json(cls, scr: dict[str, object]) -> ScrConfig:
        """From the `scr` object of a recommendation (parameters, and `descriptors`); validated
        again, since it may come over a socket."""
        params = {k: str(v) for k, v in scr.items() if k != "descriptors"}
        raw = scr.get("descriptors") or []
        if not isinstance(raw, list):
            raise ConfigError("descriptors: expected a list")
        descriptors = tuple(
            Descriptor(str(d["kind"]), str(d["value"]),
                       tuple((str(k), str(v)) for k, v in dict(d.get("keys", {})).items()))
            for d in raw if isinstance(d, dict))
        return cls.build(params, descriptors)

    def get(self, name: str) -> str | None:
        return dict(self.params).get(name)

    def conf(self) -> str:
        """An SCR config file (for SCR_CONF_FILE): upper-case keys, no quotes, LF only."""
        lines = [f"# written by scrtune for SCR v{self.target_version}; SCR reads it once, "
                 "in SCR_Init"]
        lines += [f"{name}={value}" for name, value in self.params]
        lines += [d.line() for d in self.descriptors]
        return "\n".join(lines) + "\n"

    def env(self, conf_path: str = "scrtune-scr.conf") -> str:
        """`export` lines safe to eval. Descriptors cannot travel in the environment (a STORE or
        CKPT variable would replace every descriptor line), so they go to a config file that
        these lines write, and SCR_CONF_FILE names it."""
        lines = [f"export {name}={shlex.quote(value)}" for name, value in self.params]
        if self.descriptors:
            path = shlex.quote(conf_path)
            body = "\n".join(d.line() for d in self.descriptors)
            lines += [f"cat > {path} <<'SCRTUNE_EOF'", body, "SCRTUNE_EOF",
                      f"export SCR_CONF_FILE={path}"]
        return "\n".join(lines) + "\n"

    def srun_export(self, conf_path: str = "scrtune-scr.conf") -> str:
        """For `srun --export=...`. Descriptors cannot travel this way (see env()): with any,
        SCR_CONF_FILE names `conf_path`, which must hold `descriptor_conf()`."""
        pairs = [f"{name}={value}" for name, value in self.params]
        if self.descriptors:
            if "," in conf_path or not os.path.isabs(conf_path):
                raise ConfigError(f"--conf-path {conf_path}: srun --export needs an absolute "
                                  "path without commas")
            pairs.append(f"SCR_CONF_FILE={conf_path}")
        return "--export=" + ",".join(["ALL", *pairs])

    def descriptor_conf(self) -> str:
        """The config file the env and srun forms name for the descriptor lines."""
        return "\n".join(d.line() for d in self.descriptors) + "\n"

    def scr_config(self) -> list[str]:
        """The strings every rank passes, identically and in this order, to scr.config()
        before scr.init()."""
        return [f"{name}={value}" for name, value in self.params] + \
            [d.line() for d in self.descriptors]

    def as_json(self) -> dict[str, object]:
        return {
            "target_version": self.target_version,
            "scr": dict(self.params),
            "descriptors": [{"kind": d.kind, "value": d.value, "keys": dict(d.keys)}
                            for d in self.descriptors],
        }


# v3 parses these and ignores them; v2.0.0 used them for flow control (scr-facts.md section 1.6)
USED_BY_V2 = frozenset({"SCR_FLUSH_WIDTH", "SCR_FETCH_WIDTH"})


def _check_param(name: str, value: str, target_version: str = TARGET_VERSION) -> None:
    param = BY_NAME.get(name)
    used = param is not None and (param.effect is Effect.USED or
                                  (target_version.startswith("2.") and name in USED_BY_V2))
    if not used:
        raise ConfigError(f"{name}: not a parameter the SCR v{target_version} library uses")
    if not _SAFE.fullmatch(value):
        raise ConfigError(f"{name}={value!r}: values must be one token without quotes or $")
    problem = check_value(param.kind, value, param.values)
    if problem is not None:
        raise ConfigError(f"{name}: {problem.message}")


def _check_descriptor(descriptor: Descriptor) -> None:
    keys = {k.name: k for k in DESCRIPTORS.get(descriptor.kind, ())}
    if descriptor.kind not in ("STORE", "CKPT", "GROUPS"):
        raise ConfigError(f"{descriptor.kind}: not a descriptor the SCR v3 library reads")
    for name, value in ((descriptor.kind, descriptor.value), *descriptor.keys):
        if not _SAFE.fullmatch(value):
            raise ConfigError(f"{descriptor.kind} {name}={value!r}: not one safe token")
    for name, value in descriptor.keys:
        spec = keys.get(name)
        if descriptor.kind != "GROUPS" and spec is None:
            raise ConfigError(f"{descriptor.kind}: unknown key {name}")
        if spec is not None and (problem := check_value(spec.kind, value, spec.values)):
            raise ConfigError(f"{descriptor.kind} {name}: {problem.message}")
        if descriptor.kind == "CKPT" and name == "SET_SIZE":
            raise ConfigError("CKPT SET_SIZE is ignored by SCR v3: set SCR_SET_SIZE")


def describe_changes(before: dict, after: dict) -> list[str]:
    """A change of configuration in words, one parameter each (`SCR_FILE_BUF_SIZE 32MB ->
    192MB`), from the JSON form of two configurations; a parameter one of them leaves unset
    shows SCR's default."""
    from scrtune.scr_config.catalogue import Kind
    from scrtune.scr_config.values import byte_count, format_bytes

    def shown(name: str, value: object) -> str:
        param = BY_NAME.get(name)
        text = str(value) if value is not None else (param.default if param else "") or "unset"
        if param is not None and param.kind is Kind.BYTES:
            try:
                return format_bytes(byte_count(text))
            except ValueError:
                return text
        return text

    pairs = ((name, shown(name, before.get(name)), shown(name, after.get(name)))
             for name in sorted((set(before) | set(after)) - {"descriptors"}))
    changes = [f"{name} {old} -> {new}" for name, old, new in pairs if old != new]
    if before.get("descriptors") != after.get("descriptors"):
        changes.append("store, checkpoint or group descriptors changed")
    return changes
