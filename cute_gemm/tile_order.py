"""Pure-Python mirror of csrc/tile_scheduler.h, so the tile order is tested without a GPU."""


def grouped_tile(pid: int, num_m: int, num_n: int, group: int) -> tuple[int, int]:
    """Output tile (m, n) that block `pid` computes in the GROUP_SIZE_M order."""
    num_in_group = group * num_n
    first_m = (pid // num_in_group) * group
    gsize = min(num_m - first_m, group)
    local = pid % num_in_group
    return first_m + local % gsize, local // gsize
