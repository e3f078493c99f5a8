"""DTensor sharding rules for cute_gemm's ops: those of torch's mm / addmm / bmm, so that a
cute_gemm.nn.Linear under tensor parallelism (ColwiseParallel / RowwiseParallel, whose Parameters
are DTensors) runs as torch.nn.Linear does there. Under FSDP2 (fully_shard) the modules compute on
the gathered, plain Parameters and need nothing from here.

torch.distributed.tensor costs about a second to import, so cute_gemm does not import it: the
rules are registered when it is imported, before cute_gemm or after (a finder on sys.meta_path
that lets it load as usual, then registers). The out= overloads have no rules (DTensor's mechanism
for custom ops leaves them out); nn.Linear does not use them.
"""

import sys
import warnings

import torch

_DTENSOR = "torch.distributed.tensor"


def _register() -> None:
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
    from torch.distributed.tensor.experimental import register_sharding

    ops = torch.ops.cute_gemm
    R = Replicate()
    activation_keyed = False  # whether DTensor's cache of decisions tells addmm's activations apart

    # Each rule: (output placement, [placement of each positional argument]) per mesh dimension,
    # DTensor then redistributes the arguments to the cheapest. Rows of a, columns of b, or K
    # (partial sums of the product), as torch's mm.
    @register_sharding(ops.mm.default)
    def mm_rule(a, b, **kwargs):
        return [([R], [R, R]), ([Shard(0)], [Shard(0), R]), ([Shard(1)], [R, Shard(1)]),
                ([Partial()], [Shard(1), Shard(0)])]

    @register_sharding(ops.bmm.default)
    def bmm_rule(a, b, **kwargs):
        return [([R], [R, R]), ([Shard(0)], [Shard(0), Shard(0)]), ([Shard(1)], [Shard(1), R]),
                ([Shard(2)], [R, Shard(2)]), ([Partial()], [Shard(2), Shard(1)])]

    # addmm's input broadcasts to (M, N): a bias (N,) or (1, N), a column (M, 1), a full C, a
    # scalar. It follows the output's rows or columns where it has them and is replicated where it
    # is broadcast; K sharded needs the input as a partial sum too, and no activation (which
    # would not distribute over the sum).
    @register_sharding(ops.addmm.default)
    def addmm_rule(input, a, b, *, activation=None, **kwargs):
        m, n = tuple(a.shape)[0], tuple(b.shape)[1]
        shape = tuple(input.shape)
        rows = Shard(0) if len(shape) == 2 and shape[0] == m and m != 1 else R
        cols = (Shard(len(shape) - 1) if len(shape) >= 1 and shape[-1] == n and n != 1 else R)
        rules = [([R], [R, R, R]), ([Shard(0)], [rows, Shard(0), R]), ([Shard(1)], [cols, R, Shard(1)])]
        if activation is None and activation_keyed:
            rules.append(([Partial()], [Partial(), Shard(1), Shard(0)]))
        return rules

    # DTensor caches a decision by the DTensor arguments and only the integer ones of the others
    # (register_sharding's schema info): a K-sharded addmm decided without an activation would be
    # reused for the same arguments with one. The activation joins the key (DTensor's own
    # schema-info table); where that table is not found, addmm never takes the K-sharded rule
    # (its arguments are gathered instead: right, with more communication).
    try:
        info = DTensor._op_dispatcher.sharding_propagator.op_to_schema_info[ops.addmm.default]
        info.static_kwargkey = [*(info.static_kwargkey or ()), "activation"]
        activation_keyed = True
    except (AttributeError, KeyError):
        pass

    # mm_row_sums(a, b) -> (a @ b, a's row sums): nn.Linear's weight and bias gradients (a = dY^T).
    # Rows of a (both outputs by rows), columns of b (a whole: the sums replicated), or K (partial
    # sums of both).
    @register_sharding(ops.mm_row_sums.default)
    def mm_row_sums_rule(a, b, **kwargs):
        return [([R, R], [R, R]), ([Shard(0), Shard(0)], [Shard(0), R]), ([Shard(1), R], [R, Shard(1)]),
                ([Partial(), Partial()], [Shard(1), Shard(0)])]

    # gated_mm(x, w_gate, w_up): x's rows, or the features of both weights (their rows: C's
    # columns); act(gate) * up is not a sum over K.
    @register_sharding(ops.gated_mm.default)
    def gated_mm_rule(x, w_gate, w_up, **kwargs):
        return [([R], [R, R, R]), ([Shard(0)], [Shard(0), R, R]), ([Shard(1)], [R, Shard(0), Shard(0)])]


_registered = False


def _register_quietly() -> None:
    # Once; a failure here must not fail the import of torch.distributed.tensor itself.
    global _registered
    if _registered:
        return
    _registered = True
    try:
        _register()
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"cute_gemm: its ops have no DTensor sharding rules ({type(e).__name__}: {e})", stacklevel=2)


class _RegisterOnImport:
    """Finds torch.distributed.tensor with the other finders and has its loader register the rules
    once the module has run. It stays on sys.meta_path (taking it off while another thread walks the
    list could make that thread skip a finder); after the registration it finds nothing."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != _DTENSOR or _registered:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if finder is not _RegisterOnImport and find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _register_quietly()

        spec.loader.exec_module = exec_module
        return spec


if _DTENSOR in sys.modules:
    _register_quietly()
elif torch.distributed.is_available():
    sys.meta_path.insert(0, _RegisterOnImport)
