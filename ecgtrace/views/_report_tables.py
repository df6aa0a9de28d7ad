"""HTML tables of the report: run facts, audit metrics, QA metrics. Every value is escaped."""

from __future__ import annotations

from html import escape
from typing import Any


def e(value: Any) -> str:
    """Escape anything for HTML text and attribute values (quotes included)."""
    return escape("" if value is None else str(value), quote=True)


def fmt_prop(metric: dict[str, Any] | None) -> str:
    if not metric or metric.get("value") is None:
        return "&ndash;"
    lo, hi = metric["ci95"]
    k = f" <span class=n>({e(metric['k'])}/{e(metric['n'])})</span>" if "k" in metric else ""
    return f"{100 * metric['value']:.1f}% <span class=ci>[{100 * lo:.1f}, {100 * hi:.1f}]</span>{k}"


def fmt_mean(metric: dict[str, Any] | None, scale: float = 1.0, digits: int = 2) -> str:
    if not metric or metric.get("value") is None:
        return "&ndash;"
    lo, hi = metric["ci95"]
    return f"{scale * metric['value']:.{digits}f} <span class=ci>[{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]</span> <span class=n>(n={e(metric['n'])})</span>"


def table(headers: list[str], rows: list[list[str]], cls: str = "metrics", caption: str | None = None) -> str:
    """``headers`` are escaped here; cells must already be safe HTML (built with :func:`e`)."""
    head = "".join(f"<th scope=col>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{e(caption)}</caption>" if caption else ""
    return f"<table class={cls}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def run_table(header: dict[str, Any], results: dict[str, Any] | None) -> str:
    identity = header.get("identity") or {}
    settings = header.get("settings") or {}
    rows = [["run id", e(header.get("run_id"))], ["kind", e(header.get("kind"))], ["created (UTC)", e(header.get("created_utc"))]]
    for key in ("model", "modality", "mode", "judge", "seed", "limit", "prompt_version", "scoring_version", "dataset_sha256"):
        if key in identity and identity[key] is not None:
            rows.append([e(key), e(identity[key])])
    if settings.get("dataset_path"):
        rows.append(["dataset", e(settings["dataset_path"])])
    if header.get("metrics_version"):
        rows.append(["metric definitions at start", e(f"version {header['metrics_version']}")])
    encoding = identity.get("text_encoding")
    if isinstance(encoding, dict):
        params = ", ".join(f"{k} {v if not isinstance(v, list) else ','.join(map(str, v))}" for k, v in encoding.items()
                           if k in ("fs_hz", "leads") and v)
        rows.append(["text encoding", e(f"{encoding.get('method')}{f' ({params})' if params else ''}")])
    if results:
        rows.append(["finished", e(f"{results.get('n_finished', '?')} of {results.get('n_items', '?')} samples")])
        if results.get("recomputed_from"):
            rows.append(["metrics", e(f"recomputed with version {(results.get('provenance') or {}).get('version')} "
                                      f"(results.json holds version {results['recomputed_from']})")])
        rows += control_rows(results)
    versions = header.get("versions") or {}
    if versions:
        rows.append(["versions", e(", ".join(f"{k} {v}" for k, v in sorted(versions.items())))])
    return table(["field", "value"], rows, cls="kv")


def control_rows(results: dict[str, Any]) -> list[list[str]]:
    """Run-control facts of ``results.json``: skipped samples, epochs, tokens and cost overall and per model."""
    rows = []
    skipped = results.get("skipped") or {}
    if skipped.get("n"):
        kinds = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in (skipped.get("by_kind") or {}).items())
        budget = skipped.get("budget") or {}
        where = f"; budget {budget.get('max_prompt_tokens'):,} tokens ({budget.get('source')})" if budget else ""
        rows.append(["skipped (not asked)", e(f"{skipped['n']} ({kinds}{where})")])
    epochs = results.get("epochs")
    if epochs:
        agree = epochs.get("agreement") or {}
        means = ", ".join(f"{k} {m['value']:.3f}" for k, m in (epochs.get("mean") or {}).items() if m.get("value") is not None)
        share = f"{100 * agree['samples_agree']:.1f}%" if agree.get("samples_agree") is not None else "-"
        rows.append(["epochs", e(f"{epochs.get('epochs')} (mean {means}; samples answering alike in every epoch {share})")])
    usage = results.get("usage") or {}
    for model, block in sorted((usage.get("per_model") or {}).items()):
        tokens = block.get("tokens") or {}
        cost = f"; {block['cost_usd']:.4f} USD" if block.get("cost_usd") is not None else ""
        missing = f"; {block['without_usage']:,} without usage" if block.get("without_usage") else ""
        rows.append([e(f"tokens: {model}"), e(f"{tokens.get('prompt_tokens', 0):,} prompt + {tokens.get('completion_tokens', 0):,} "
                                              f"completion in {block.get('requests', 0):,} requests{missing}{cost}")])
    if usage.get("cost_usd") is not None:
        rows.append(["cost (total)", e(f"{usage['cost_usd']:.4f} {usage.get('currency', 'USD')}")])
    return rows


# ------------------------------------------------------------------ audit

def audit_tables(results: dict[str, Any]) -> str:
    overall = results["overall"]
    blocks = [*results.get("per_diagnosis", {}).items(), ("overall", overall)]
    rows = [[e(name), e(b["n"]), fmt_prop(b["ida"]), fmt_prop(b["gt_rda"]), fmt_prop(b.get("decision_acc")), fmt_prop(b["completion"]),
             fmt_mean(b["depth"]), fmt_mean(b.get("depth_per_sample")), e(b["turns"]["errors"]), e(b["turns"]["parse_failures"])]
            for name, b in blocks]
    out = ["<h2 id=summary>Summary</h2>",
           table(["diagnosis", "n", "IDA", "GT-RDA", "Decision acc.", "Completion", "Depth (0-4)", "Depth per sample", "errors", "parse failures"],
                 rows, caption="Reasoning-audit metrics with 95% intervals (Wilson; Depth pooled over loops, clustered by sample; "
                               "GT-RDA: last loop's decision per sample; Decision acc.: every decision turn)")]
    stage_keys = sorted({k for _, b in blocks for k in b.get("stages", {})})
    if stage_keys:
        stage_rows = [[e(name)] + [fmt_prop(b.get("stages", {}).get(k)) for k in stage_keys] for name, b in blocks]
        out += ["<h2 id=stages>Per-stage accuracy</h2>", table(["diagnosis", *stage_keys], stage_rows, caption="Share of asked turns answered correctly")]
    return "\n".join(out)


# ------------------------------------------------------------------ QA

def _task_metric(block: dict[str, Any]) -> tuple[str, str]:
    fam = block.get("family")
    if fam == "numeric" and block.get("score_mae"):
        parts = [f"{v['score_mae']:.1f} <span class=n>(MAE {v['mae']:.4g} {e(v['unit'])}, &mu;={e(v['mu'])}, &sigma;={e(v['sigma'])}, n={e(v['n'])})</span>"
                 for v in block["score_mae"].values()]
        return "ScoreMAE", "<br>".join(parts)
    if fam == "timestamps":
        m = block["micro"]
        return "timestamp F1 (micro)", f"{100 * m['f1']:.1f}% <span class=n>(P {100 * m['precision']:.1f}%, R {100 * m['recall']:.1f}%)</span>"
    if fam == "report":
        return "fields within tolerance", fmt_mean(block["field_accuracy"], 100.0, 1)
    if fam == "text":
        return "ROUGE-L F &times;100", fmt_mean(block["rouge_l"], 100.0, 1)
    return "accuracy", fmt_prop(block.get("accuracy"))


def qa_tables(results: dict[str, Any]) -> str:
    rows = []
    for task, block in results.get("per_task", {}).items():
        name, value = _task_metric(block)
        judge = block.get("judge")
        rows.append([e(task), e(block["n"]), name, value, fmt_prop(block.get("accuracy")) if block.get("family") != "closed" and block.get("accuracy") else "",
                     fmt_mean(block["mean_score"], 1.0, 1), fmt_mean(judge["score"], 1.0, 1) if judge else "&ndash;",
                     e(block["errors"]), e(block["parse_failures"])])
    overall = results["overall"]
    rows.append(["<b>overall</b>", e(overall["n"]), "closed accuracy", fmt_prop(overall["closed_accuracy"]), "", fmt_mean(overall["mean_score"], 1.0, 1), "", "", ""])
    out = ["<h2 id=summary>Summary per task</h2>",
           table(["task", "n", "metric", "value [95% CI]", "within tolerance", "mean item score (0-100)", "judge score", "errors", "parse failures"], rows,
                 caption="QA metrics; proportions with Wilson 95% intervals, means with normal 95% intervals")]
    findings = results.get("per_finding") or {}
    if findings:
        frows = [[e(name), e(b["n"]), fmt_prop(b["closed_accuracy"]), fmt_mean(b["mean_score"], 1.0, 1)] for name, b in findings.items()]
        out += ["<h2 id=findings>Per diagnosis / finding</h2>", table(["finding", "n", "closed accuracy", "mean item score"], frows)]
    for task, block in results.get("per_task", {}).items():
        if block.get("family") == "report" and block.get("fields"):
            frows = [[e(name), fmt_prop(metric)] for name, metric in block["fields"].items()]
            frows.append(["<i>hallucination rate</i>", fmt_prop(block.get("hallucination_rate"))])
            out += [f"<h3>{e(task)}: statistics within tolerance</h3>", table(["statistic", "accuracy"], frows)]
    return "\n".join(out)


# ------------------------------------------------------------------ tokens and cost

def usage_table(usage: dict[str, Any]) -> str:
    """Requests, tokens and cost per model (:func:`ecgtrace.views.usage.run_usage`)."""
    def cost(value: Any) -> str:
        return "&ndash;" if value is None else e(f"${value:.4f}")

    def row(name: str, role: str, b: dict[str, Any]) -> list[str]:
        return [e(name), e(role), e(b["requests"]), e(b["reported"]), e(f"{b['prompt_tokens']:,}"), e(f"{b['completion_tokens']:,}"),
                e(f"{b['total_tokens']:,}"), cost(b["cost_usd"])]

    rows = [row(m["model"], m["role"], m) for m in usage["per_model"]] + [row("total", "", usage["total"])]
    price = usage.get("price")
    caption = (f"price ${price['in_per_mtok']:g} / ${price['out_per_mtok']:g} per 1M input / output tokens" if price
               else "the run names no price: tokens only") + "; tokens as the server reported them"
    return "<h2 id=usage>Tokens and cost</h2>" + table(
        ["model", "role", "requests", "with usage", "prompt tokens", "completion tokens", "total tokens", "cost"], rows, caption=caption)
