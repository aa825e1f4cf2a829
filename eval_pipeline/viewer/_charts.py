"""Charts as inline SVG, drawn on the server: pass rate over days (lines) and cost per day (bars)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

from eval_pipeline.viewer._html import Markup, el, fmt_cost, fmt_pct, join

PALETTE = (
    "#4f46e5",
    "#0891b2",
    "#d97706",
    "#db2777",
    "#059669",
    "#7c3aed",
    "#dc2626",
    "#65a30d",
    "#0f766e",
    "#9333ea",
)

WIDTH, HEIGHT = 760, 260
LEFT, RIGHT, TOP, BOTTOM = 62, 16, 14, 30
INSET = 24  # points keep clear of the axes, so the first and last day's labels fit


def model_colors(models: Sequence[str]) -> dict[str, str]:
    """A stable color per model: the same model keeps its color on every page."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(models))}


@dataclass(frozen=True)
class ModelLook:
    """How each model is shown, by its id (which links and filters keep): the name the user
    spells it by (nao's `openaiCompatible/vllm:qwen3` for `vllm:qwen3`) and its color."""

    spellings: Mapping[str, str]
    colors: Mapping[str, str]

    @classmethod
    def of(cls, models: Sequence[str], spellings: Mapping[str, str]) -> ModelLook:
        return cls(spellings, model_colors(models))

    def name(self, model: str) -> str:
        return self.spellings.get(model) or model

    def color(self, model: str) -> str:
        return self.colors.get(model, "#999")


def _x_positions(days: Sequence[date]) -> dict[date, float]:
    width = WIDTH - LEFT - RIGHT - 2 * INSET
    if len(days) == 1:
        return {days[0]: LEFT + INSET + width / 2}
    first, span = days[0], (days[-1] - days[0]).days or 1
    return {d: LEFT + INSET + width * (d - first).days / span for d in days}


def _x_labels(days: Sequence[date], xs: Mapping[date, float]) -> list[Markup]:
    step = max(1, -(-len(days) // 8))
    shown = days[::step]
    if days and days[-1] not in shown:
        shown = [*shown[:-1], days[-1]] if len(shown) > 1 else [*shown, days[-1]]
    return [
        el(
            "text",
            d.strftime("%b %d"),
            x=f"{xs[d]:.1f}",
            y=str(HEIGHT - 8),
            text_anchor="middle",
        )
        for d in shown
    ]


def _y_axis(ticks: Sequence[float], y: Callable[[float], float], label: Callable) -> Markup:
    return join(
        [
            join(
                el(
                    "line",
                    x1=str(LEFT),
                    x2=str(WIDTH - RIGHT),
                    y1=f"{y(t):.1f}",
                    y2=f"{y(t):.1f}",
                    stroke="#eceef2",
                ),
                el("text", label(t), x=str(LEFT - 8), y=f"{y(t) + 4:.1f}", text_anchor="end"),
            )
            for t in ticks
        ]
    )


def _svg(title: str, *children: object) -> Markup:
    return el(
        "svg",
        el("title", title),
        *children,
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
        class_="chart",
        role="img",
        xmlns="http://www.w3.org/2000/svg",
    )


def legend(colors: Mapping[str, str], models: Sequence[str]) -> Markup:
    return el(
        "div",
        [el("span", dot(colors[m]), m) for m in models],
        class_="legend",
    )


def _error_bar(x: float, top: float, bottom: float, color: str) -> Markup:
    cap = 4.0
    return el(
        "g",
        [
            el(
                "line",
                x1=f"{x1:.1f}",
                x2=f"{x2:.1f}",
                y1=f"{y1:.1f}",
                y2=f"{y2:.1f}",
                stroke=color,
                stroke_width="1.2",
                stroke_opacity="0.55",
            )
            for x1, x2, y1, y2 in (
                (x, x, top, bottom),
                (x - cap, x + cap, top, top),
                (x - cap, x + cap, bottom, bottom),
            )
        ],
        class_="ci",
    )


def pass_rate_chart(
    points: Mapping[str, Sequence[tuple[date, float]]],
    colors: Mapping[str, str],
    *,
    intervals: Mapping[str, Mapping[date, tuple[float, float]]] | None = None,
) -> Markup:
    """One line per model: the share of its runs that passed, per day (0–100%).

    Args:
        points: model → (day, pass rate as a fraction).
        colors: model → its color (`model_colors`).
        intervals: model → day → 95% interval (fractions), drawn as error bars, so a dip
            inside the bars reads as noise rather than as a change.
    """
    days = sorted({d for series in points.values() for d, _ in series})
    if not days:
        return el("p", "No results in this window.", class_="muted")
    xs = _x_positions(days)

    def y(value: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - value)

    lines = []
    for model, series in points.items():
        color = colors[model]
        ordered = sorted(series)
        path = " ".join(f"{xs[d]:.1f},{y(v):.1f}" for d, v in ordered)
        lines.append(
            el(
                "polyline",
                points=path,
                fill="none",
                stroke=color,
                stroke_width="2.2",
                stroke_linejoin="round",
            )
        )
        bounds = (intervals or {}).get(model, {})
        for d, _ in ordered:
            if d in bounds:
                lines.append(_error_bar(xs[d], y(bounds[d][1]), y(bounds[d][0]), color))
        for d, v in ordered:
            interval = (
                f" (95% CI {fmt_pct(bounds[d][0])}–{fmt_pct(bounds[d][1])})" if d in bounds else ""
            )
            lines.append(
                el(
                    "circle",
                    el("title", f"{model} · {d.isoformat()} · {fmt_pct(v)}{interval}"),
                    cx=f"{xs[d]:.1f}",
                    cy=f"{y(v):.1f}",
                    r="3.6",
                    fill="#fff",
                    stroke=color,
                    stroke_width="2",
                )
            )
    return _svg(
        "Pass rate per model over days",
        _y_axis([0, 0.25, 0.5, 0.75, 1.0], y, lambda t: f"{t:.0%}"),
        _x_labels(days, xs),
        lines,
    )


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10 if value >= 1 else 1.0
    while magnitude > value and magnitude > 1e-6:
        magnitude /= 10
    for factor in (1, 2, 2.5, 5, 10):
        if magnitude * factor >= value:
            return magnitude * factor
    return value


def cost_chart(
    costs: Mapping[date, Mapping[str, float]], colors: Mapping[str, str], models: Sequence[str]
) -> Markup:
    """Bars per day, stacked by model: what the day's runs cost (runs without a price add 0)."""
    days = sorted(costs)
    if not days or not any(v for day in costs.values() for v in day.values()):
        return el("p", "No priced runs in this window.", class_="muted")
    top = _nice_max(max(sum(v for v in costs[d].values() if v) for d in days))
    plot_w = WIDTH - LEFT - RIGHT
    slot = plot_w / len(days)
    bar_w = max(4.0, min(38.0, slot * 0.6))

    def y(value: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - value / top)

    bars = []
    xs = {}
    for i, d in enumerate(days):
        x = LEFT + slot * (i + 0.5)
        xs[d] = x
        base = 0.0
        for model in models:
            value = costs[d].get(model) or 0.0
            if value <= 0:
                continue
            bars.append(
                el(
                    "rect",
                    el("title", f"{model} · {d.isoformat()} · {fmt_cost(value)}"),
                    x=f"{x - bar_w / 2:.1f}",
                    y=f"{y(base + value):.1f}",
                    width=f"{bar_w:.1f}",
                    height=f"{max(0.5, y(base) - y(base + value)):.1f}",
                    fill=colors[model],
                    rx="2",
                )
            )
            base += value
    ticks = [top * f for f in (0, 0.25, 0.5, 0.75, 1.0)]
    decimals = 0 if top >= 40 else 2 if top >= 0.4 else 3 if top >= 0.04 else 4
    return _svg(
        "Cost per day, stacked by model",
        _y_axis(ticks, y, lambda t: f"${t:,.{decimals}f}"),
        _x_labels(days, xs),
        bars,
    )


def dot(color: str) -> Markup:
    return el("span", class_="dot", style=f"background:{color}")
