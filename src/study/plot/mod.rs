//! The plots of a sweep, as SVG text drawn with plotters' SVG backend (no font files, no
//! system library), made to be read in a paper:
//!
//! * line plots against each numeric knob that varies ([`lines`]): memory items and
//!   tokens that fit, as small multiples (one panel per device or model), the legend
//!   outside the data, a log2 axis for a doubling grid, short exact tick labels
//!   ([`scale`]), series told apart by colour, marker and dash ([`style`]), and marks for
//!   points whose worst case does not fit, points without a plan and capped points;
//! * plan-region maps ([`regions`]): over one or two knobs, which points make the same
//!   provider/profile choice, one colour and letter per choice across every map of the
//!   sweep (drawn from the single-device rows);
//! * the Pareto plot ([`pareto`]) of a sweep with a serving point: output tokens/s per
//!   device against per user, the frontier marked and its points labelled by what changed.
//!
//! Every figure comes with its [`Layout`] (plot areas, legends, text boxes), the contract
//! the figure test checks against a real font's measurements.

pub mod axes;
pub mod canvas;
pub mod lines;
pub mod pareto;
pub mod regions;
pub mod scale;
pub mod style;

use std::collections::BTreeMap;

pub use canvas::{Layout, Rect};
pub use regions::{Choices, Region, RegionMap};

use lines::{LineFigure, LinePoint, Panel, Series};
use pareto::{ParetoFigure, ParetoPoint};
use scale::{is_doubling, Unit};

use super::sweep::{short_value, SweepRow};
use super::sweep_time::{PLACEMENT_RULE, SINGLE_DEVICE_RULE};
use super::StudyError;

/// The knobs whose values are numbers (line plots are drawn against them).
pub const NUMERIC_KNOBS: [&str; 5] = [
    "context",
    "sequences",
    "scheduled_tokens",
    "layers",
    "experts",
];

/// The knobs that split a line plot into panels (small multiples).
pub const PANEL_KNOBS: [&str; 2] = ["model", "device"];

/// One figure: its file name, SVG text and layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// File name (`memory-vs-context.svg`, `regions-a100-80gb.svg`).
    pub name: String,
    /// The SVG text.
    pub svg: String,
    /// Where its parts lie.
    pub layout: Layout,
}

/// Rows grouped by the values of every knob in `others` (in grid order of first row);
/// each group's label is `knob=value ...`.
pub fn group_by<'a>(
    rows: &'a [SweepRow],
    others: &[&str],
) -> BTreeMap<usize, (String, Vec<&'a SweepRow>)> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<usize, (String, Vec<&SweepRow>)> = BTreeMap::new();
    for row in rows {
        let label = others
            .iter()
            .map(|k| format!("{k}={}", row.point.value(k)))
            .collect::<Vec<_>>()
            .join(" ");
        let index = match order.iter().position(|l| *l == label) {
            Some(i) => i,
            None => {
                order.push(label.clone());
                order.len() - 1
            }
        };
        groups
            .entry(index)
            .or_insert_with(|| (label, Vec::new()))
            .1
            .push(row);
    }
    groups
}

/// The short label of `row`'s values of `knobs`: one knob by its value alone, several as
/// `knob=value`, joined by `, `.
fn short_label(row: &SweepRow, knobs: &[&str]) -> String {
    match knobs {
        [knob] => short_value(knob, &row.point.value(knob)),
        _ => knobs
            .iter()
            .map(|k| format!("{k}={}", short_value(k, &row.point.value(k))))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The distinct values of `label` over `rows`, in order of first appearance.
fn labels(rows: &[SweepRow], label: impl Fn(&SweepRow) -> String) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for row in rows {
        let l = label(row);
        if !seen.contains(&l) {
            seen.push(l);
        }
    }
    seen
}

/// A memory item of the report.
const ITEMS: [&str; 5] = [
    "weights",
    "KV cache per sequence",
    "activations",
    "workspaces",
    "headroom",
];

fn figure(row: &SweepRow, item: &str) -> Option<f64> {
    let r = row.report.as_ref()?;
    Some(match item {
        "weights" => r.weights_bytes as f64,
        "KV cache per sequence" => r.kv_bytes_per_sequence as f64,
        "activations" => r.activation_bytes as f64,
        "workspaces" => r.workspace_bytes as f64,
        "headroom" => r.headroom_bytes as f64,
        "tokens that fit" => r.tokens_that_fit? as f64,
        _ => return None,
    })
}

/// The two line figures against `knob`: memory items and tokens that fit.
fn line_figures(
    rows: &[SweepRow],
    varying: &[&str],
    knob: &str,
) -> Result<Vec<Figure>, StudyError> {
    let others: Vec<&str> = varying.iter().copied().filter(|k| *k != knob).collect();
    let panel_knobs: Vec<&str> = others
        .iter()
        .copied()
        .filter(|k| PANEL_KNOBS.contains(k))
        .collect();
    let series_knobs: Vec<&str> = others
        .iter()
        .copied()
        .filter(|k| !PANEL_KNOBS.contains(k))
        .collect();
    let panel_of = |r: &SweepRow| short_label(r, &panel_knobs);
    let series_of = |r: &SweepRow| short_label(r, &series_knobs);
    let panels = labels(rows, panel_of);
    let series_labels = labels(rows, series_of);
    let xs: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.point.value(knob).parse().ok())
        .collect();
    let x_name = if is_doubling(&xs) {
        format!("{knob} (log2 scale)")
    } else {
        knob.to_owned()
    };
    let points = |panel: &str, series: &str, item: &str| -> Vec<LinePoint> {
        let mut points: Vec<LinePoint> = Vec::new();
        for r in rows {
            if panel_of(r) != panel || series_of(r) != series {
                continue;
            }
            let Ok(x) = r.point.value(knob).parse::<f64>() else {
                continue;
            };
            if points.iter().any(|p| p.x == x) {
                continue;
            }
            points.push(LinePoint {
                x,
                y: figure(r, item),
                fits: r.status == "fits",
                capped: r.capped(),
            });
        }
        points.sort_by(|a, b| a.x.total_cmp(&b.x));
        points
    };
    let series_heading = series_knobs.join(", ");
    let mut memory_panels = Vec::new();
    let mut token_panels = Vec::new();
    for panel in &panels {
        let mut memory = Vec::new();
        let mut tokens = Vec::new();
        for (style, series) in series_labels.iter().enumerate() {
            let token_points = points(panel, series, "tokens that fit");
            if token_points.is_empty() {
                continue;
            }
            for (colour, item) in ITEMS.iter().enumerate() {
                memory.push(Series {
                    colour,
                    style,
                    points: points(panel, series, item),
                });
            }
            tokens.push(Series {
                colour: style,
                style,
                points: token_points,
            });
        }
        memory_panels.push(Panel {
            title: panel.clone(),
            series: memory,
        });
        token_panels.push(Panel {
            title: panel.clone(),
            series: tokens,
        });
    }
    let style_labels: Vec<String> = if series_knobs.is_empty() {
        vec!["every point".to_owned()]
    } else {
        series_labels.clone()
    };
    let panel_note = if panel_knobs.is_empty() {
        String::new()
    } else {
        format!(", one panel per {}", panel_knobs.join(" and "))
    };
    let memory = LineFigure {
        title: format!("Memory items against {knob}{panel_note}"),
        x_name: x_name.clone(),
        y_name: "bytes (log2 scale)".to_owned(),
        y_unit: Unit::Bytes,
        y_log: true,
        panels: memory_panels,
        colours: (
            "memory item".to_owned(),
            ITEMS.iter().map(|s| (*s).to_owned()).collect(),
        ),
        styles: (series_heading.clone(), style_labels.clone()),
    };
    let tokens = LineFigure {
        title: format!("Tokens of KV cache that fit against {knob}{panel_note}"),
        x_name,
        y_name: "tokens that fit".to_owned(),
        y_unit: Unit::Count,
        y_log: false,
        panels: token_panels,
        colours: (String::new(), Vec::new()),
        styles: (
            if series_heading.is_empty() {
                "series".to_owned()
            } else {
                series_heading
            },
            style_labels,
        ),
    };
    let mut out = Vec::new();
    for (name, fig) in [("memory", memory), ("tokens", tokens)] {
        let (svg, layout) = fig.svg()?;
        out.push(Figure {
            name: format!("{name}-vs-{knob}.svg"),
            svg,
            layout,
        });
    }
    Ok(out)
}

/// A file-name part of a label: letters, digits, `.`, `_` and `-`; anything else `_`.
fn file_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The short form of a knob's value in a Pareto label: `tp4`, `pp2`, `c32`, `in1024`,
/// `out256`, `ctx8192`, `s16`, a weight format without `dense-` (`bf16`, `fp8`), a file by
/// its short name.
pub fn label_part(knob: &str, value: &str) -> String {
    let prefix = match knob {
        "tensor_parallel" => "tp",
        "pipeline_parallel" => "pp",
        "concurrency" => "c",
        "input_tokens" => "in",
        "output_tokens" => "out",
        "context" => "ctx",
        "sequences" => "s",
        "scheduled_tokens" => "tok",
        "layers" => "L",
        "experts" => "E",
        "weight_format" => return value.strip_prefix("dense-").unwrap_or(value).to_owned(),
        "storage_views" => return value.split('>').next().unwrap_or(value).to_owned(),
        _ => return short_value(knob, value),
    };
    format!("{prefix}{value}")
}

/// A time rule in words (the rule ids stay in the CSV and JSON).
fn rule_words(rule: &str) -> String {
    match rule {
        SINGLE_DEVICE_RULE => "serving simulation on one device".to_owned(),
        PLACEMENT_RULE => "serving simulation on the placement".to_owned(),
        other => other.replace('-', " "),
    }
}

/// An engine's time profile by the engine's own name (`vllm` -> `vLLM`).
pub fn engine_words(profile: &str) -> &str {
    match profile {
        "vllm" => "vLLM",
        "vllm@0.6" => "vLLM V0",
        "sglang" => "SGLang",
        "trtllm" => "TensorRT-LLM",
        other => other,
    }
}

/// The legend notes that say what priced the points, in words: the models that priced
/// them (serving simulation on one device, serving simulation on the placement), then the
/// engines' time profiles they used, a few per line (`times: serving simulation on one
/// device`, `engine time profile: vLLM`).
fn priced_by(priced: &[&SweepRow]) -> Vec<String> {
    let mut rules: Vec<&str> = Vec::new();
    let mut engines: Vec<&str> = Vec::new();
    for time in priced.iter().filter_map(|r| r.time.as_ref()) {
        if !rules.contains(&time.rule.as_str()) {
            rules.push(&time.rule);
        }
        if !engines.contains(&time.engine.as_str()) {
            engines.push(&time.engine);
        }
    }
    let words: Vec<String> = rules.iter().map(|r| rule_words(r)).collect();
    let mut notes = vec![format!("times: {}", words.join(" and "))];
    let head = if engines.len() == 1 {
        "engine time profile: "
    } else {
        "engine time profiles: "
    };
    // A long list wraps after about 40 characters (the legend stays narrow).
    let mut line = head.to_owned();
    for (index, engine) in engines.iter().enumerate() {
        let name = engine_words(engine);
        let part = if index + 1 < engines.len() {
            format!("{name}, ")
        } else {
            name.to_owned()
        };
        if line.trim().len() + part.len() > 40 && line.len() > head.len() {
            notes.push(line.trim_end().to_owned());
            line = "  ".to_owned();
        }
        line.push_str(&part);
    }
    notes.push(line);
    notes
}

/// The Pareto plot of the rows with times (`None` when no row has one), drawn.
pub fn pareto_figure(rows: &[SweepRow], varying: &[&str]) -> Result<Option<Figure>, StudyError> {
    let Some(figure) = pareto_data(rows, varying) else {
        return Ok(None);
    };
    let (svg, layout) = figure.svg()?;
    Ok(Some(Figure {
        name: "pareto.svg".to_owned(),
        svg,
        layout,
    }))
}

/// The Pareto plot's data (`None` when no row has times): a point per priced row,
/// labelled by its varying knobs (and a parallel degree its placement chose beyond them),
/// coloured by the varying knobs other than concurrency.
pub fn pareto_data(rows: &[SweepRow], varying: &[&str]) -> Option<ParetoFigure> {
    let priced: Vec<&SweepRow> = rows
        .iter()
        .filter(|r| {
            r.time.as_ref().is_some_and(|t| {
                t.output_tokens_per_second_per_user > 0.0
                    && t.output_tokens_per_second_per_device > 0.0
            })
        })
        .collect();
    if priced.is_empty() {
        return None;
    }
    let series_knobs: Vec<&str> = varying
        .iter()
        .copied()
        .filter(|k| *k != "concurrency")
        .collect();
    let label_of = |r: &SweepRow, knobs: &[&str]| {
        knobs
            .iter()
            .map(|k| label_part(k, &r.point.value(k)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let owned: Vec<SweepRow> = priced.iter().map(|r| (*r).clone()).collect();
    let series_labels = labels(&owned, |r| label_of(r, &series_knobs));
    let points = priced
        .iter()
        .filter_map(|r| {
            let t = r.time.as_ref()?;
            let series = series_labels
                .iter()
                .position(|l| *l == label_of(r, &series_knobs))?;
            // A degree the placement chose (not a knob of the grid) changed too.
            let mut label = label_of(r, varying);
            if let Some(p) = &r.placement {
                for (knob, degree) in [
                    ("tensor_parallel", p.tensor_parallel),
                    ("pipeline_parallel", p.pipeline_parallel),
                ] {
                    if degree > 1 && !varying.contains(&knob) {
                        label.push(' ');
                        label.push_str(&label_part(knob, &degree.to_string()));
                    }
                }
            }
            let label = label.trim().to_owned();
            Some(ParetoPoint {
                per_user: t.output_tokens_per_second_per_user,
                per_device: t.output_tokens_per_second_per_device,
                label,
                series,
                order: r.point.concurrency.map_or(0.0, |c| c as f64),
            })
        })
        .collect();
    let mut notes = Vec::new();
    let missing = rows.len() - priced.len();
    if missing > 0 {
        notes.push(format!("{missing} of {} points without times", rows.len()));
    }
    notes.extend(priced_by(&priced));
    let fixed: Vec<String> = [
        ("concurrency", "concurrency "),
        ("input_tokens", ""),
        ("output_tokens", ""),
    ]
    .iter()
    .filter(|(k, _)| !varying.contains(k))
    .filter_map(|(k, prefix)| {
        let v = priced[0].point.value(k);
        let unit = match *k {
            "input_tokens" => " input tokens",
            "output_tokens" => " output tokens",
            _ => "",
        };
        (!v.is_empty()).then(|| format!("{prefix}{v}{unit}"))
    })
    .collect();
    // What every point shares: the model, on which device or set, in which weight format,
    // under which engine (`llama-3.1-8b on h100-sxm-80gb`).
    let value = |k: &str| {
        if varying.contains(&k) {
            String::new()
        } else {
            label_part(k, &priced[0].point.value(k))
        }
    };
    let mut subject = value("model");
    for (knob, joint) in [
        ("device", " on "),
        ("devices", " on "),
        ("weight_format", ", "),
        ("engine", ", "),
    ] {
        let v = value(knob);
        if !v.is_empty() {
            subject = if subject.is_empty() {
                v
            } else {
                format!("{subject}{joint}{v}")
            };
        }
    }
    // The axes and the legend say what is drawn; the title says of what.
    let title = match (subject.is_empty(), fixed.is_empty()) {
        (true, true) => "Pareto frontier of throughput per device against per user".to_owned(),
        (true, false) => format!("Pareto frontier: {}", fixed.join(", ")),
        (false, true) => format!("Pareto frontier: {subject}"),
        (false, false) => format!("Pareto frontier: {subject}, {}", fixed.join(", ")),
    };
    Some(ParetoFigure {
        title,
        points,
        series: (
            if series_knobs.is_empty() {
                "series".to_owned()
            } else {
                series_knobs.join(", ")
            },
            series_labels,
        ),
        notes,
    })
}

/// Every figure of `rows` (`varying`: the knobs with more than one value, the region map's
/// axes first): `memory-vs-KNOB.svg` and `tokens-vs-KNOB.svg` per numeric knob, the
/// region maps of the single-device rows, `regions.svg` or one `regions-VALUES.svg` per
/// combination of the knobs beyond the map's two axes (`regions-a100-80gb.svg`), and
/// `pareto.svg` when rows have times.
pub fn figures(rows: &[SweepRow], varying: &[&str]) -> Result<Vec<Figure>, StudyError> {
    let mut out = Vec::new();
    // The line plots and region maps draw single-device plans' memory reports and plan
    // choices: a sweep of device sets has the Pareto plot alone.
    let sets_only = !rows.is_empty() && rows.iter().all(|r| r.point.devices.is_some());
    if sets_only {
        out.extend(pareto_figure(rows, varying)?);
        return Ok(out);
    }
    for knob in varying.iter().filter(|k| NUMERIC_KNOBS.contains(k)) {
        out.extend(line_figures(rows, varying, knob)?);
    }
    out.extend(pareto_figure(rows, varying)?);
    let Some(x) = varying.first() else {
        return Ok(out);
    };
    let y = varying.get(1).copied();
    let rest: Vec<&str> = varying.iter().skip(2).copied().collect();
    let choices = Choices::of(rows);
    let groups = group_by(rows, &rest);
    let mut names: Vec<String> = Vec::new();
    for (index, (_, members)) in groups.values().enumerate() {
        let map = RegionMap::in_sweep(members, x, y, &choices);
        let label = members
            .first()
            .map(|r| short_label(r, &rest))
            .unwrap_or_default();
        let title = if label.is_empty() {
            "Plan regions".to_owned()
        } else {
            format!("Plan regions, {label}")
        };
        let mut name = if groups.len() == 1 {
            "regions.svg".to_owned()
        } else {
            let values: Vec<String> = members
                .first()
                .map(|r| {
                    rest.iter()
                        .map(|k| short_value(k, &r.point.value(k)))
                        .collect()
                })
                .unwrap_or_default();
            format!("regions-{}.svg", file_part(&values.join("-")))
        };
        if names.contains(&name) {
            name = format!("regions-{}.svg", index + 1);
        }
        names.push(name.clone());
        let (svg, layout) = map.figure(&title)?;
        out.push(Figure { name, svg, layout });
    }
    Ok(out)
}

/// Draws every figure of `rows` into `dir` ([`figures`]). Returns the files written.
pub fn write_plots(
    dir: &std::path::Path,
    rows: &[SweepRow],
    varying: &[&str],
) -> Result<Vec<String>, StudyError> {
    let mut written = Vec::new();
    for figure in figures(rows, varying)? {
        let file = dir.join(&figure.name);
        std::fs::write(&file, &figure.svg).map_err(|e| StudyError::Settings {
            path: file.display().to_string(),
            message: format!("cannot write the plot: {e}"),
        })?;
        written.push(figure.name);
    }
    Ok(written)
}
