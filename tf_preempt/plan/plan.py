"""The plan: an ordered list of collectives that every worker executes alike.

A plan is the only thing the planner hands to the runtime. It names the
tensors it was made for (position, name, size, element size), and lists the
collectives in the order they must be issued; each collective is a list of
pieces, byte ranges of tensors, that are fused into one all-reduce. Every byte
of every tensor is in exactly one piece (`Plan.validate` checks it).

Split plans (simulation only, DeAR-style, see `rsag.py`) replace some
all-reduces by a reduce-scatter and a later all-gather of the SAME pieces:
a ring reduce-scatter leaves each worker one shard of the concatenated
buffer, so only an all-gather over that very buffer can rebuild it. There
every byte is in exactly one all-reduce or reduce-scatter, and each
reduce-scatter is matched by one later all-gather with identical pieces.
The kinds are an optional JSON field ("kinds"), written only when a plan
has a collective that is not an all-reduce, so all-reduce plans keep their
JSON and their fingerprint. A reader without split support rejects a split
plan (its all-gathers cover bytes a second time) instead of misreading it.

The fingerprint is a SHA-256 of a canonical JSON form, so it is the same in
every process, on every machine and under any PYTHONHASHSEED.
"""

import dataclasses
import hashlib
import json
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

FORMAT_VERSION = 1

ALL_REDUCE = "all_reduce"
REDUCE_SCATTER = "reduce_scatter"
ALL_GATHER = "all_gather"
KINDS = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER)


@dataclasses.dataclass(frozen=True)
class Piece:
  """A byte range of one tensor.

  Attributes:
    tensor: position of the tensor in `Plan.tensors`.
    offset: first byte, a multiple of the tensor's itemsize.
    length: number of bytes, a multiple of the tensor's itemsize, > 0.
  """
  tensor: int
  offset: int
  length: int


@dataclasses.dataclass(frozen=True)
class Collective:
  """One collective: the pieces it fuses, in the order they are concatenated.

  Attributes:
    pieces: the byte ranges, in buffer order.
    kind: one of KINDS; all-reduce unless the plan splits it.
  """
  pieces: Tuple[Piece, ...]
  kind: str = ALL_REDUCE

  @property
  def nbytes(self) -> int:
    return sum(p.length for p in self.pieces)

  @property
  def tensors(self) -> Tuple[int, ...]:
    """Positions of the tensors this collective touches, without repeats."""
    return tuple(dict.fromkeys(p.tensor for p in self.pieces))


@dataclasses.dataclass(frozen=True)
class PlanTensor:
  """What a plan knows of a tensor it was made for.

  Attributes:
    name: a name for error messages (a variable name or a DAG tensor name).
    nbytes: size in bytes.
    itemsize: bytes per element; pieces are cut at element boundaries.
    dtype: optional dtype name ("float32", ...), checked when binding.
    shape: optional static shape, checked when binding.
  """
  name: str
  nbytes: int
  itemsize: int = 4
  dtype: Optional[str] = None
  shape: Optional[Tuple[int, ...]] = None


@dataclasses.dataclass(frozen=True)
class Plan:
  """An ordered list of collectives over a list of tensors.

  Attributes:
    tensors: the tensors, in the order the gradients are handed over.
    collectives: the collectives in issue order.
    scheduler: name of the scheduler that made the plan.
    options: the scheduler's options (JSON-serialisable values).
    predicted_iteration_s: the simulator's iteration time, if known.
  """
  tensors: Tuple[PlanTensor, ...]
  collectives: Tuple[Collective, ...]
  scheduler: str = "manual"
  options: Dict[str, Any] = dataclasses.field(default_factory=dict)
  predicted_iteration_s: Optional[float] = None

  def __post_init__(self):
    object.__setattr__(self, "tensors", tuple(self.tensors))
    object.__setattr__(self, "collectives", tuple(
        c if isinstance(c, Collective) else Collective(tuple(c))
        for c in self.collectives))
    self.validate()

  def validate(self) -> None:
    """Checks that the plan reduces every byte exactly once.

    Every byte is in exactly one all-reduce or reduce-scatter, and every
    reduce-scatter is followed by exactly one all-gather of the same pieces
    (and every all-gather follows one).

    Raises:
      ValueError: naming the tensor or collective at fault.
    """
    if not self.tensors:
      raise ValueError("Plan has no tensors.")
    for t in self.tensors:
      if t.nbytes <= 0 or t.itemsize <= 0 or t.nbytes % t.itemsize:
        raise ValueError(
            f"Plan tensor {t.name!r}: nbytes={t.nbytes} must be a positive "
            f"multiple of itemsize={t.itemsize}.")
    covered: List[List[Tuple[int, int]]] = [[] for _ in self.tensors]
    scattered: Dict[Tuple[Piece, ...], List[int]] = {}
    for i, coll in enumerate(self.collectives):
      if not coll.pieces:
        raise ValueError(f"Plan collective {i} has no pieces.")
      if coll.kind not in KINDS:
        raise ValueError(f"Plan collective {i}: kind {coll.kind!r} is not "
                         f"one of {KINDS}.")
      if coll.kind == ALL_GATHER:
        # Its bytes were counted at the reduce-scatter it completes.
        waiting = scattered.get(coll.pieces)
        if not waiting:
          raise ValueError(f"Plan collective {i} all-gathers pieces that no "
                           "earlier reduce-scatter with the same pieces "
                           "left open.")
        waiting.pop()
        continue
      if coll.kind == REDUCE_SCATTER:
        scattered.setdefault(coll.pieces, []).append(i)
      for p in coll.pieces:
        if not 0 <= p.tensor < len(self.tensors):
          raise ValueError(f"Plan collective {i} names tensor {p.tensor}, "
                           f"but the plan has {len(self.tensors)} tensors.")
        t = self.tensors[p.tensor]
        if (p.length <= 0 or p.offset < 0 or p.offset % t.itemsize or
            p.length % t.itemsize or p.offset + p.length > t.nbytes):
          raise ValueError(
              f"Plan collective {i}: piece {p} of tensor {t.name!r} "
              f"({t.nbytes} bytes, itemsize {t.itemsize}) is out of range "
              "or not element-aligned.")
        covered[p.tensor].append((p.offset, p.offset + p.length))
    for t, ranges in zip(self.tensors, covered):
      ranges.sort()
      end = 0
      for lo, hi in ranges:
        if lo != end:
          what = "overlap" if lo < end else "gap"
          raise ValueError(f"Plan tensor {t.name!r}: bytes {min(lo, end)}.."
                           f"{max(lo, end)} are a {what} in the plan.")
        end = hi
      if end != t.nbytes:
        raise ValueError(f"Plan tensor {t.name!r}: bytes {end}..{t.nbytes} "
                         "are not in any collective.")
    open_rs = sorted(i for left in scattered.values() for i in left)
    if open_rs:
      raise ValueError(f"Plan reduce-scatter collective(s) {open_rs} have no "
                       "later all-gather of the same pieces.")

  # --- queries -------------------------------------------------------------

  @property
  def num_collectives(self) -> int:
    return len(self.collectives)

  @property
  def is_all_reduce(self) -> bool:
    """True when every collective is an all-reduce (what the runtime runs)."""
    return all(c.kind == ALL_REDUCE for c in self.collectives)

  def pieces_of(self, tensor: int) -> List[Tuple[int, Piece]]:
    """Returns [(collective index, piece)] of one tensor, by offset.

    The collectives that reduce it: all-reduces and reduce-scatters (an
    all-gather repeats its reduce-scatter's pieces).
    """
    found = [(i, p) for i, c in enumerate(self.collectives)
             if c.kind != ALL_GATHER
             for p in c.pieces if p.tensor == tensor]
    return sorted(found, key=lambda ip: ip[1].offset)

  def summary(self) -> Dict[str, Any]:
    """A short description for logs and stats lines."""
    sizes = [c.nbytes for c in self.collectives]
    return {
        "scheduler": self.scheduler,
        "tensors": len(self.tensors),
        "collectives": len(self.collectives),
        "fused": sum(1 for c in self.collectives if len(c.tensors) > 1),
        "split_tensors": sum(
            1 for i in range(len(self.tensors)) if len(self.pieces_of(i)) > 1),
        "max_collective_bytes": max(sizes),
        "min_collective_bytes": min(sizes),
        "predicted_iteration_s": self.predicted_iteration_s,
        "fingerprint": self.fingerprint()[:16],
    }

  # --- serialisation -------------------------------------------------------

  def _kinds(self) -> Optional[List[str]]:
    """The per-collective kinds, or None for an all-reduce plan."""
    return None if self.is_all_reduce else [c.kind for c in self.collectives]

  def to_dict(self) -> Dict[str, Any]:
    data = {
        "format": FORMAT_VERSION,
        "scheduler": self.scheduler,
        "options": self.options,
        "predicted_iteration_s": self.predicted_iteration_s,
        "tensors": [{
            "name": t.name,
            "nbytes": t.nbytes,
            "itemsize": t.itemsize,
            "dtype": t.dtype,
            "shape": None if t.shape is None else list(t.shape),
        } for t in self.tensors],
        "collectives": [[[p.tensor, p.offset, p.length] for p in c.pieces]
                        for c in self.collectives],
    }
    kinds = self._kinds()
    if kinds is not None:
      data["kinds"] = kinds
    return data

  def to_json(self, indent: Optional[int] = None) -> str:
    return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

  @classmethod
  def from_dict(cls, data: Dict[str, Any]) -> "Plan":
    """Rebuilds a plan from `to_dict`'s output.

    Raises:
      ValueError: if the data is not a plan of this format.
    """
    try:
      if data.get("format") != FORMAT_VERSION:
        raise ValueError(f"unknown plan format {data.get('format')!r} "
                         f"(this version reads {FORMAT_VERSION})")
      tensors = tuple(
          PlanTensor(name=str(t["name"]), nbytes=int(t["nbytes"]),
                     itemsize=int(t["itemsize"]), dtype=t.get("dtype"),
                     shape=None if t.get("shape") is None else tuple(
                         int(d) for d in t["shape"]))
          for t in data["tensors"])
      kinds = data.get("kinds")
      if kinds is None:
        kinds = [ALL_REDUCE] * len(data["collectives"])
      elif len(kinds) != len(data["collectives"]):
        raise ValueError(f"{len(kinds)} kinds for "
                         f"{len(data['collectives'])} collectives")
      collectives = tuple(
          Collective(tuple(Piece(int(a), int(b), int(c)) for a, b, c in coll),
                     kind=str(kind))
          for coll, kind in zip(data["collectives"], kinds))
      predicted = data.get("predicted_iteration_s")
      return cls(tensors=tensors, collectives=collectives,
                 scheduler=str(data.get("scheduler", "manual")),
                 options=dict(data.get("options") or {}),
                 predicted_iteration_s=None if predicted is None
                 else float(predicted))
    except (KeyError, TypeError, AttributeError) as e:
      raise ValueError(f"Not a valid plan: {type(e).__name__}: {e}") from e

  @classmethod
  def from_json(cls, text: str) -> "Plan":
    """Parses `to_json`'s output.

    Raises:
      ValueError: on malformed JSON or a malformed plan.
    """
    try:
      data = json.loads(text)
    except json.JSONDecodeError as e:
      raise ValueError(f"Plan JSON is malformed: {e}") from e
    if not isinstance(data, dict):
      raise ValueError("Plan JSON must be an object.")
    return cls.from_dict(data)

  def fingerprint(self) -> str:
    """A stable hash of what the workers must agree on.

    It covers the tensors and the collectives, not the predicted time or the
    options (two workers may predict differently and still agree).
    """
    fields = {
        "tensors": [[t.nbytes, t.itemsize, t.dtype,
                     None if t.shape is None else list(t.shape)]
                    for t in self.tensors],
        "collectives": self.to_dict()["collectives"],
    }
    kinds = self._kinds()
    if kinds is not None:
      # Only split plans hash the kinds: all-reduce plans keep the
      # fingerprint they had before kinds existed.
      fields["kinds"] = kinds
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def split_evenly(nbytes: int, itemsize: int, chunk_bytes: Optional[int]
                 ) -> List[Tuple[int, int]]:
  """Cuts [0, nbytes) into element-aligned (offset, length) chunks.

  Chunks are at most `chunk_bytes` long (rounded down to whole elements, at
  least one element) and as equal as element alignment allows.

  Args:
    nbytes: total size, a multiple of itemsize.
    itemsize: bytes per element.
    chunk_bytes: the largest chunk; None or 0 means one chunk.

  Returns:
    A list of (offset, length) pairs that cover [0, nbytes) in order.
  """
  elements = nbytes // itemsize
  if not chunk_bytes or chunk_bytes >= nbytes:
    return [(0, nbytes)]
  per_chunk = max(1, chunk_bytes // itemsize)
  count = math.ceil(elements / per_chunk)
  base, extra = divmod(elements, count)
  out, offset = [], 0
  for i in range(count):
    n = (base + (1 if i < extra else 0)) * itemsize
    out.append((offset, n))
    offset += n
  return out


def plan_from_groups(tensors: Sequence[PlanTensor],
                     groups: Sequence[Sequence[Tuple[int, int, int]]],
                     scheduler: str = "manual",
                     options: Optional[Dict[str, Any]] = None,
                     predicted_iteration_s: Optional[float] = None,
                     kinds: Optional[Sequence[str]] = None) -> Plan:
  """Builds a plan from collectives given as [(tensor, offset, length)].

  `kinds`, one per group, defaults to all-reduce everywhere.
  """
  kinds = [ALL_REDUCE] * len(groups) if kinds is None else list(kinds)
  if len(kinds) != len(groups):
    raise ValueError(f"plan_from_groups: {len(kinds)} kinds for "
                     f"{len(groups)} groups.")
  return Plan(tensors=tuple(tensors),
              collectives=tuple(
                  Collective(tuple(Piece(*p) for p in g), kind=k)
                  for g, k in zip(groups, kinds)),
              scheduler=scheduler, options=dict(options or {}),
              predicted_iteration_s=predicted_iteration_s)
