"""Synthetic training DAGs: chains, residual nets, transformer-like stacks.

Used by the tests and `scripts/plan_speed.py`. Every generator describes the
forward graph only; `from_forward` mirrors it into the backward pass (each
forward op `x` gets a backward op `x/grad`, edges reversed) and attaches each
tensor to the forward op that reads it and to that op's backward op, which
produces its gradient.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tf_preempt.plan import dag as dag_lib

MiB = 1 << 20


def from_forward(durations: Dict[str, float],
                 edges: Sequence[Tuple[str, str]],
                 tensors: Sequence[Tuple[str, int, str]],
                 backward_factor: float = 2.0) -> dag_lib.TrainingDAG:
  """Builds a TrainingDAG from a forward graph.

  Args:
    durations: forward op name -> seconds (insertion order kept).
    edges: forward dependency edges.
    tensors: (name, nbytes, forward op that reads it), in variable order.
    backward_factor: backward op duration / forward op duration.

  Returns:
    The DAG.
  """
  ops = [dag_lib.Op(n, "forward", float(d)) for n, d in durations.items()]
  ops += [dag_lib.Op(n + "/grad", "backward", float(d) * backward_factor)
          for n, d in durations.items()]
  all_edges = list(edges) + [(b + "/grad", a + "/grad") for a, b in edges]
  infos = [dag_lib.TensorInfo(n, int(s), op + "/grad", (op,), 4)
           for n, s, op in tensors]
  return dag_lib.TrainingDAG(ops, all_edges, infos)


def _duration(nbytes: int, flops_per_byte: float, rng) -> float:
  jitter = 1.0 if rng is None else float(rng.uniform(0.5, 1.5))
  return (2e-5 + nbytes * flops_per_byte * 1e-12) * jitter


def chain(num_layers: int, rng: Optional[np.random.Generator] = None,
          min_bytes: int = 1024, max_bytes: int = 16 * MiB,
          flops_per_byte: float = 200.0) -> dag_lib.TrainingDAG:
  """A sequential model with log-uniform layer sizes."""
  rng = rng or np.random.default_rng(0)
  sizes = np.exp(rng.uniform(np.log(min_bytes), np.log(max_bytes),
                             num_layers)).astype(np.int64) // 4 * 4 + 4
  fwd = [_duration(int(s), flops_per_byte, rng) for s in sizes]
  return dag_lib.TrainingDAG.chain(fwd, [2 * f for f in fwd], sizes.tolist())


def residual(num_blocks: int, rng: Optional[np.random.Generator] = None,
             width_bytes: int = 2 * MiB, flops_per_byte: float = 200.0,
             with_bn: bool = True) -> dag_lib.TrainingDAG:
  """A ResNet-like stack: blocks of two convs with a skip connection."""
  rng = rng or np.random.default_rng(0)
  durations: Dict[str, float] = {"stem": 1e-4}
  edges: List[Tuple[str, str]] = []
  tensors: List[Tuple[str, int, str]] = [("stem/w", 37632, "stem")]
  prev = "stem"
  for i in range(num_blocks):
    size = int(width_bytes * 2 ** (i * 3 // num_blocks)) // 4 * 4
    a, b, add = f"blk{i}/a", f"blk{i}/b", f"blk{i}/add"
    for op in (a, b):
      s = int(size * rng.uniform(0.5, 1.5)) // 4 * 4
      durations[op] = _duration(s, flops_per_byte, rng)
      tensors.append((op + "/w", s, op))
      if with_bn:
        tensors.append((op + "/bn", 256 * (1 + i * 4 // num_blocks), op))
    durations[add] = 1e-5
    edges += [(prev, a), (a, b), (b, add), (prev, add)]
    prev = add
  durations["head"] = 5e-5
  edges.append((prev, "head"))
  tensors.append(("head/w", 8 * 1024, "head"))
  return from_forward(durations, edges, tensors)


def transformer(num_layers: int, rng: Optional[np.random.Generator] = None,
                d_bytes: int = 1 * MiB, flops_per_byte: float = 300.0
                ) -> dag_lib.TrainingDAG:
  """Transformer-like layers: parallel q/k/v branches, attention, FFN."""
  rng = rng or np.random.default_rng(0)
  durations: Dict[str, float] = {"embed": 1e-4}
  edges: List[Tuple[str, str]] = []
  tensors: List[Tuple[str, int, str]] = [("embed/w", 4 * d_bytes, "embed")]
  prev = "embed"
  for i in range(num_layers):
    names = {k: f"l{i}/{k}" for k in ("q", "k", "v", "attn", "o", "ln1",
                                      "ff1", "ff2", "ln2")}
    for k in ("q", "k", "v", "o"):
      s = int(d_bytes * rng.uniform(0.8, 1.2)) // 4 * 4
      durations[names[k]] = _duration(s, flops_per_byte, rng)
      tensors.append((names[k] + "/w", s, names[k]))
    durations[names["attn"]] = 2e-4
    for k in ("ff1", "ff2"):
      s = 4 * d_bytes
      durations[names[k]] = _duration(s, flops_per_byte, rng)
      tensors.append((names[k] + "/w", s, names[k]))
    for k in ("ln1", "ln2"):
      durations[names[k]] = 1e-5
      tensors.append((names[k] + "/g", 2048, names[k]))
    edges += [(prev, names["q"]), (prev, names["k"]), (prev, names["v"]),
              (names["q"], names["attn"]), (names["k"], names["attn"]),
              (names["v"], names["attn"]), (names["attn"], names["o"]),
              (names["o"], names["ln1"]), (prev, names["ln1"]),
              (names["ln1"], names["ff1"]), (names["ff1"], names["ff2"]),
              (names["ff2"], names["ln2"]), (names["ln1"], names["ln2"])]
    prev = names["ln2"]
  return from_forward(durations, edges, tensors)


def resnet50_like(flops_per_byte: float = 400.0) -> dag_lib.TrainingDAG:
  """ResNet-50's shape: 16 bottleneck blocks, 161 tensors, 256 B .. 9.4 MB.

  Conv kernels and batch-norm gammas/betas with ResNet-50's sizes; durations
  grow with the kernel size (a rough roofline, not a measurement).
  """
  durations: Dict[str, float] = {"stem": 3e-4}
  edges: List[Tuple[str, str]] = []
  tensors: List[Tuple[str, int, str]] = [
      ("stem/w", 7 * 7 * 3 * 64 * 4, "stem"), ("stem/bn_g", 256, "stem"),
      ("stem/bn_b", 256, "stem")]
  prev, cin = "stem", 64
  stages = [(64, 3), (128, 4), (256, 6), (512, 3)]
  for si, (width, blocks) in enumerate(stages):
    for bi in range(blocks):
      base = f"s{si}b{bi}"
      convs = [("c1", 1, cin, width), ("c2", 3, width, width),
               ("c3", 1, width, 4 * width)]
      last = prev
      for name, k, ci, co in convs:
        op = f"{base}/{name}"
        nbytes = k * k * ci * co * 4
        durations[op] = 5e-5 + nbytes * flops_per_byte * 1e-12
        edges.append((last, op))
        tensors += [(op + "/w", nbytes, op), (op + "/bn_g", co * 4, op),
                    (op + "/bn_b", co * 4, op)]
        last = op
      add = f"{base}/add"
      durations[add] = 1e-5
      edges.append((last, add))
      if bi == 0:
        proj = f"{base}/proj"
        nbytes = cin * 4 * width * 4
        durations[proj] = 5e-5 + nbytes * flops_per_byte * 1e-12
        edges += [(prev, proj), (proj, add)]
        tensors += [(proj + "/w", nbytes, proj),
                    (proj + "/bn_g", 16 * width, proj),
                    (proj + "/bn_b", 16 * width, proj)]
      else:
        edges.append((prev, add))
      prev, cin = add, 4 * width
  durations["fc"] = 5e-5
  edges.append((prev, "fc"))
  tensors += [("fc/w", 2048 * 1000 * 4, "fc"), ("fc/b", 1000 * 4, "fc")]
  return from_forward(durations, edges, tensors)


def random_small(rng: np.random.Generator, max_tensors: int = 5,
                 branchy: Optional[bool] = None) -> dag_lib.TrainingDAG:
  """A small random DAG: a chain, or a random forward DAG (branches)."""
  n = int(rng.integers(2, max_tensors + 1))
  if branchy is None:
    branchy = bool(rng.integers(0, 2))
  durations = {f"op{i}": float(rng.uniform(0.0, 1.0)) for i in range(n)}
  if branchy:
    edges = [(f"op{a}", f"op{b}") for b in range(1, n) for a in range(b)
             if rng.random() < 0.4]
  else:
    edges = [(f"op{i}", f"op{i + 1}") for i in range(n - 1)]
  tensors = [(f"t{i}", int(rng.integers(1, 40)) * 4, f"op{i}")
             for i in range(n)]
  return from_forward(durations, edges, tensors,
                      backward_factor=float(rng.uniform(0.5, 2.0)))
