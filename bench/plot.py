"""The benchmark's figure: TFLOP/s per shape, one panel per suite and dtype, one bar series per
implementation. Takes bench_mm's panels of plain row dicts, so it runs anywhere matplotlib does."""

from matplotlib.figure import Figure


def write_plot(panels: list[tuple[str, str, list[dict]]], path, title: str) -> None:
    """panels: (suite, dtype, rows); one row of panels per suite, one column per dtype."""
    suites = list(dict.fromkeys(suite for suite, _, _ in panels))
    dtypes = list(dict.fromkeys(dtype for _, dtype, _ in panels))
    impls = list(dict.fromkeys(name for _, _, rows in panels for r in rows for name in r["impls"]))
    fig = Figure(figsize=(7.5 * len(dtypes), 3.4 * len(suites)), layout="constrained")
    axes = fig.subplots(len(suites), len(dtypes), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    width = 0.8 / len(impls)
    for suite, dtype, rows in panels:
        ax = axes[suites.index(suite)][dtypes.index(dtype)]
        ax.set_visible(True)
        for s, name in enumerate(impls):
            xs = [x + (s - (len(impls) - 1) / 2) * width for x in range(len(rows))]
            results = [r["impls"].get(name) for r in rows]
            ax.bar(xs, [res.get("tflops", 0) if res else 0 for res in results], width, label=name, color=f"C{s}")
            for x, res in zip(xs, results):
                if res and "tflops" not in res:  # measured, but wrong or failed: say so where the bar would be
                    ax.text(x, 0, " WRONG" if res.get("wrong") else " failed", rotation=90,
                            ha="center", va="bottom", fontsize=7, color=f"C{s}")
        ax.set_xticks(range(len(rows)), [f"{r['m']}x{r['n']}x{r['k']}" for r in rows],
                      rotation=15, ha="right", fontsize=8)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{suite}, {dtype}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside upper right", fontsize=8,
               ncols=len(impls))
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=110)
