//! The figures in `docs/`: drawn again from the code and compared with the committed
//! files, rendered with resvg and measured with a real font (usvg's text layout, the
//! system's DejaVu Sans): every text inside the canvas, no text or legend over a plot area
//! (except a region map's cell letters, which annotate the data), no two texts on top of
//! each other.
//!
//! `JOINTPLAN_BLESS=1 cargo test --test figures` writes the figures (SVG, and PNG rendered
//! at twice the size for the README and docs) instead of comparing them.
//!
//! Fonts: the test needs DejaVu Sans among the system fonts (Debian: `fonts-dejavu-core`).

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jointplan::placement::sweep::SweepPlacer;
use jointplan::study::plot::pareto::frontier;
use jointplan::study::plot::{figures, pareto_data, Figure, Rect};
use jointplan::study::sweep::{plan_batch, Grid, SweepRow};
use jointplan::BuildOptions;
use resvg::{tiny_skia, usvg};

/// A study whose figures the docs show: its grid and the figures kept in `dir`.
struct Study {
    grid: &'static str,
    dir: &'static str,
    keep: &'static [&'static str],
}

const STUDIES: [Study; 4] = [
    Study {
        grid: "docs/research/kv-study.json",
        dir: "docs/research",
        keep: &[
            "memory-vs-context.svg",
            "tokens-vs-context.svg",
            "regions-rtx-4090-24gb.svg",
            "regions-a100-80gb.svg",
        ],
    },
    Study {
        grid: "docs/python/study.json",
        dir: "docs/python",
        keep: &["tokens-vs-context.svg"],
    },
    Study {
        grid: "docs/research/pareto-study.json",
        dir: "docs/research",
        keep: &["pareto.svg"],
    },
    Study {
        grid: "docs/research/engines/engine-pareto.json",
        dir: "docs/research/engines",
        keep: &["pareto.svg"],
    },
];

/// A study's sweep: its rows, its plot axes and its figures.
struct Drawn {
    rows: Vec<SweepRow>,
    axes: Vec<&'static str>,
    figures: Vec<Figure>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every figure of every study (the sweeps run once per test binary).
fn all_figures() -> Vec<(&'static Study, &'static Vec<Figure>)> {
    all_studies()
        .iter()
        .map(|(study, drawn)| (*study, &drawn.figures))
        .collect()
}

/// Every study swept and drawn (once per test binary).
fn all_studies() -> &'static Vec<(&'static Study, Drawn)> {
    static FIGURES: OnceLock<Vec<(&'static Study, Drawn)>> = OnceLock::new();
    FIGURES.get_or_init(|| {
        STUDIES
            .iter()
            .map(|study| {
                let text = std::fs::read_to_string(root().join(study.grid)).unwrap();
                let grid: Grid = serde_json::from_str(&text).unwrap();
                let options = BuildOptions {
                    threads: NonZeroUsize::new(2),
                    ..BuildOptions::default()
                };
                let rows = plan_batch(
                    &grid.points().unwrap(),
                    Some(&root()),
                    &BTreeSet::new(),
                    &options,
                    &SweepPlacer,
                )
                .unwrap();
                let axes = grid.plot_axes().unwrap();
                let figures = figures(&rows, &axes).unwrap();
                (
                    study,
                    Drawn {
                        rows,
                        axes,
                        figures,
                    },
                )
            })
            .collect()
    })
}

fn options() -> usvg::Options<'static> {
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    fonts.set_sans_serif_family("DejaVu Sans");
    let dejavu = fonts
        .faces()
        .any(|f| f.families.iter().any(|(name, _)| name == "DejaVu Sans"));
    assert!(
        dejavu,
        "the figure test measures text with DejaVu Sans: install it (Debian: apt-get install \
         fonts-dejavu-core)"
    );
    options
}

fn tree(svg: &str) -> usvg::Tree {
    usvg::Tree::from_str(svg, &options()).unwrap()
}

fn png(tree: &usvg::Tree, file: &Path) {
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width() * 2, size.height() * 2).unwrap();
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        tree,
        tiny_skia::Transform::from_scale(2.0, 2.0),
        &mut pixmap.as_mut(),
    );
    pixmap.save_png(file).unwrap();
}

/// Every text of the tree with its box on the canvas.
fn texts(group: &usvg::Group, out: &mut Vec<(String, Rect)>) {
    for node in group.children() {
        match node {
            usvg::Node::Group(g) => texts(g, out),
            usvg::Node::Text(t) => {
                let b = t.abs_bounding_box();
                let content: String = t.chunks().iter().map(|c| c.text()).collect();
                out.push((
                    content,
                    Rect::new(
                        f64::from(b.left()),
                        f64::from(b.top()),
                        f64::from(b.right()),
                        f64::from(b.bottom()),
                    ),
                ));
            }
            _ => {}
        }
    }
}

fn normalized(svg: &str) -> String {
    svg.replace("\r\n", "\n")
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

fn bless() -> bool {
    std::env::var_os("JOINTPLAN_BLESS").is_some_and(|v| v == "1")
}

#[test]
fn committed_figures_are_what_the_code_draws() {
    let mut stale = Vec::new();
    for (study, figures) in all_figures() {
        for name in study.keep {
            let figure = figures
                .iter()
                .find(|f| f.name == *name)
                .unwrap_or_else(|| panic!("{} draws no {name}", study.grid));
            let file = root().join(study.dir).join(name);
            if bless() {
                std::fs::write(&file, &figure.svg).unwrap();
                png(&tree(&figure.svg), &file.with_extension("png"));
                continue;
            }
            let committed = std::fs::read_to_string(&file).unwrap_or_default();
            if normalized(&committed) != normalized(&figure.svg) {
                stale.push(file.display().to_string());
            }
            let png = std::fs::read(file.with_extension("png")).unwrap_or_default();
            let size = tree(&figure.svg).size().to_int_size();
            // The PNG's header: width and height, big-endian, at bytes 16..24.
            let dims = (png.len() >= 24).then(|| {
                (
                    u32::from_be_bytes([png[16], png[17], png[18], png[19]]),
                    u32::from_be_bytes([png[20], png[21], png[22], png[23]]),
                )
            });
            if dims != Some((size.width() * 2, size.height() * 2)) {
                stale.push(format!("{} (PNG)", file.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "figures differ from what the code draws: {stale:?}; regenerate them with \
         JOINTPLAN_BLESS=1 cargo test --test figures"
    );
}

#[test]
fn texts_lie_inside_the_canvas_and_off_the_data() {
    const SLACK: f64 = 0.5;
    let shrink = |r: &Rect| Rect::new(r.x0 + SLACK, r.y0 + SLACK, r.x1 - SLACK, r.y1 - SLACK);
    let grow = |r: &Rect| Rect::new(r.x0 - 1.0, r.y0 - 1.0, r.x1 + 1.0, r.y1 + 1.0);
    let mut problems = Vec::new();
    let mut measured = 0;
    for (_, figures) in all_figures() {
        for figure in figures {
            let layout = &figure.layout;
            let tree = tree(&figure.svg);
            let size = tree.size();
            assert_eq!(
                (size.width() as u32, size.height() as u32),
                (layout.width, layout.height)
            );
            let canvas = Rect::new(0.0, 0.0, f64::from(layout.width), f64::from(layout.height));
            let mut boxes = Vec::new();
            texts(tree.root(), &mut boxes);
            assert_eq!(
                boxes.len(),
                layout.texts.len(),
                "{}: every text is laid out with the font",
                figure.name
            );
            measured += boxes.len();
            for (text, b) in &boxes {
                if !canvas.contains(&shrink(b)) {
                    problems.push(format!("{}: {text:?} {b:?} leaves the canvas", figure.name));
                }
                let annotation = layout
                    .annotations
                    .iter()
                    .any(|a| grow(a).contains(b) || a.contains(&shrink(b)));
                for area in &layout.plot_areas {
                    if !annotation && area.overlaps(&shrink(b)) {
                        problems.push(format!("{}: {text:?} {b:?} covers the data", figure.name));
                    }
                }
                // A label beside a point covers no point's marker.
                if annotation && layout.marks.iter().any(|m| m.overlaps(&shrink(b))) {
                    problems.push(format!("{}: {text:?} {b:?} covers a point", figure.name));
                }
            }
            for (i, (a, ra)) in boxes.iter().enumerate() {
                for (b, rb) in &boxes[i + 1..] {
                    if shrink(ra).overlaps(&shrink(rb)) {
                        problems.push(format!("{}: {a:?} and {b:?} overlap", figure.name));
                    }
                }
            }
            for legend in &layout.legends {
                for area in &layout.plot_areas {
                    if legend.overlaps(area) {
                        problems.push(format!("{}: a legend covers the data", figure.name));
                    }
                }
                if !canvas.contains(legend) {
                    problems.push(format!("{}: a legend leaves the canvas", figure.name));
                }
            }
        }
    }
    assert!(measured > 0);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The frontier by definition: the points no other point is at least as good as on both
/// axes and better on one, by an O(n^2) check of every pair.
fn brute_frontier(points: &[(f64, f64)]) -> BTreeSet<usize> {
    (0..points.len())
        .filter(|&i| {
            let (x, y) = points[i];
            !points
                .iter()
                .any(|&(a, b)| a >= x && b >= y && (a > x || b > y))
        })
        .collect()
}

#[test]
fn the_frontier_is_the_brute_force_one_on_random_points_with_ties() {
    // A small linear congruential generator: deterministic, with many equal coordinates.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |range: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % range
    };
    for case in 0..400 {
        let n = (case % 40) as usize;
        let range = 2 + (case % 7);
        let points: Vec<(f64, f64)> = (0..n)
            .map(|_| (next(range) as f64 * 1.5, next(range) as f64 * 0.25))
            .collect();
        let fast: BTreeSet<usize> = frontier(&points).into_iter().collect();
        assert_eq!(fast, brute_frontier(&points), "case {case}: {points:?}");
        // Ordered by the per-user figure.
        let order = frontier(&points);
        assert!(order.windows(2).all(|w| points[w[0]].0 <= points[w[1]].0));
    }
}

#[test]
fn the_pareto_plot_labels_exactly_the_brute_force_frontier() {
    let mut checked = 0;
    for (study, drawn) in all_studies() {
        let Some(figure) = drawn.figures.iter().find(|f| f.name == "pareto.svg") else {
            continue;
        };
        let data = pareto_data(&drawn.rows, &drawn.axes).unwrap();
        // Every row with times is a point, with the row's figures.
        let priced: Vec<(f64, f64)> = drawn
            .rows
            .iter()
            .filter_map(|r| r.time.as_ref())
            .map(|t| {
                (
                    t.output_tokens_per_second_per_user,
                    t.output_tokens_per_second_per_device,
                )
            })
            .collect();
        let points: Vec<(f64, f64)> = data
            .points
            .iter()
            .map(|p| (p.per_user, p.per_device))
            .collect();
        assert_eq!(points, priced, "{}", study.grid);
        let expected: BTreeSet<String> = brute_frontier(&points)
            .into_iter()
            .map(|i| data.points[i].label.clone())
            .collect();
        assert!(
            expected.len() > 1,
            "{}: a frontier of one point",
            study.grid
        );
        let drawn_labels: BTreeSet<String> = figure
            .layout
            .texts
            .iter()
            .filter(|(_, r)| figure.layout.annotations.contains(r))
            .map(|(t, _)| t.clone())
            .collect();
        assert_eq!(
            drawn_labels, expected,
            "{}: the labels beside the points are the frontier's",
            study.grid
        );
        checked += 1;
    }
    assert!(checked > 0, "no study draws a Pareto plot");
}
