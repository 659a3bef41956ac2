//! A serving engine's accounting as text (`jointplan plan --engine`).

use crate::engine::EngineReport;

/// An engine's accounting for people (the end of `plan --engine`'s summary): the budget
/// terms, the log lines the engine would print, each with its rule, then the flags.
pub fn engine_text(report: &EngineReport) -> String {
    let mut out = format!(
        "engine {} {} (rules: docs/engines.md):\n",
        report.name, report.version
    );
    for term in &report.budget {
        out.push_str(&format!(
            "  {:<16} {:>16} bytes  ({})\n",
            term.name, term.bytes, term.rule
        ));
    }
    for line in &report.log {
        out.push_str(&format!("  log: {}\n    rule: {}\n", line.line, line.rule));
    }
    out.push_str(&format!("  flags: {}\n", report.flags.join(" ")));
    if let Some(refusal) = &report.refusal {
        out.push_str(&format!(
            "  {} would refuse to start: {refusal}\n",
            report.name
        ));
    }
    out
}
