//! The shape of `src/`, checked: the module import graph has no cycles, the modules keep the map
//! `lib.rs`'s doc draws (every module in it once; a bottom-layer module imports only modules of the
//! bullets listed before its own, so no feature; a feature imports exactly the features its bullet
//! says it "uses"), chat, metrics and transcode never import each other, and only the composition
//! root (`daemon`, with `lib.rs`/`main.rs`) knows the daemon's assembled state. `make lint` runs this
//! too.
//!
//! The graph is read from the source text: every `crate::<module>` path outside comments in a file of
//! top-level module A is an edge A → module (files `src/a.rs` and `src/a/**` belong to A).
//!
//! Inside every folder of `src/` the files' own import graph has no cycles either: there a file's
//! `super::…`, `self::…` and `crate::<folder>::…` paths (and a `mod.rs`'s paths to its children) are
//! edges to the files they name, `mod.rs` (or `src/<folder>.rs`) standing for its folder. Where a
//! `mod.rs` is the folder's front (`FRONT_MOD_RS`), its paths to its own children are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Features that must talk through the bus or handles only.
const ISOLATED: &[&str] = &["chat", "metrics", "transcode"];
/// Offline tools `main.rs` runs as subcommands: they may use features, the root does not wire them.
const TOOLS: &[&str] = &["import"];
/// The composition root.
const ROOT: &str = "daemon";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments (line comments, doc comments and block comments).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_block = 0usize;
    for line in text.lines() {
        let mut rest = line;
        let mut kept = String::new();
        loop {
            if in_block > 0 {
                match rest.find("*/") {
                    Some(i) => {
                        in_block -= 1;
                        rest = &rest[i + 2..];
                    }
                    None => break,
                }
            } else {
                let line_comment = rest.find("//");
                let block = rest.find("/*");
                match (line_comment, block) {
                    (Some(l), Some(b)) if b < l => {
                        kept.push_str(&rest[..b]);
                        in_block += 1;
                        rest = &rest[b + 2..];
                    }
                    (Some(l), _) => {
                        kept.push_str(&rest[..l]);
                        break;
                    }
                    (None, Some(b)) => {
                        kept.push_str(&rest[..b]);
                        in_block += 1;
                        rest = &rest[b + 2..];
                    }
                    (None, None) => {
                        kept.push_str(rest);
                        break;
                    }
                }
            }
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// `crate::<name>` references in `code`.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + 7..];
        let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let preceded_by_ident = rest[..i].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name.is_empty() && !preceded_by_ident {
            refs.insert(name);
        }
        rest = after;
    }
    refs
}

/// Top-level module → the top-level modules it references.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| f.strip_prefix(&src).ok())
        .filter_map(|rel| rel.components().next())
        .map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string())
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let top = rel.components().next().expect("a component").as_os_str().to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read a source file");
        // Unit tests may reach anywhere; only the module's code counts.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for r in crate_refs(&code_only(code)) {
            if r != top && modules.contains(&r) {
                graph.entry(top.clone()).or_default().insert(r);
            }
        }
    }
    graph
}

/// One cycle of the graph, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::Active);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next).copied().unwrap_or(Mark::New) {
                Mark::Active => {
                    let start = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(next, graph, marks, path) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(node, graph, &mut marks, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// lib.rs's map of the modules, read from its doc comment: the bottom layer in its order, each
/// feature with the modules its bullet says it "uses", the tools and the composition root.
struct ModuleMap {
    /// The bottom layer's bullets, in order; the modules one bullet names are peers.
    bottom: Vec<Vec<String>>,
    /// Feature → the modules (besides the bottom layer) its bullet says it uses.
    features: BTreeMap<String, BTreeSet<String>>,
    tools: Vec<String>,
    root: Vec<String>,
}

impl ModuleMap {
    fn bottom_modules(&self) -> impl Iterator<Item = &String> {
        self.bottom.iter().flatten()
    }

    fn is_bottom(&self, m: &str) -> bool {
        self.bottom_modules().any(|b| b == m)
    }

    /// The position of a bottom module's bullet.
    fn rank(&self, m: &str) -> Option<usize> {
        self.bottom.iter().position(|names| names.iter().any(|n| n == m))
    }
}

/// The names in backticks in `text` (`` `a` ``, `` [`a`] ``).
fn backticked(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The modules a feature's bullet says it uses: every backticked module name from a word "uses" to
/// the end of its clause (`;` or the end of a sentence), outside parentheses (which explain).
fn uses_of(bullet: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let lower = bullet.to_ascii_lowercase();
    for (start, _) in lower.match_indices("uses ") {
        if lower[..start].chars().last().is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        let (mut depth, mut code) = (0usize, None::<String>);
        let mut chars = bullet[start..].chars().peekable();
        while let Some(c) = chars.next() {
            match (c, code.as_mut()) {
                ('`', Some(name)) => {
                    if depth == 0 && modules.contains(name.as_str()) {
                        out.insert(std::mem::take(name));
                    }
                    code = None;
                }
                ('`', None) => code = Some(String::new()),
                (c, Some(name)) => name.push(c),
                ('(', None) => depth += 1,
                (')', None) => depth = depth.saturating_sub(1),
                (';', None) if depth == 0 => break,
                ('.', None) if depth == 0 && chars.peek().is_none_or(|n| n.is_whitespace()) => break,
                _ => {}
            }
        }
    }
    out
}

/// lib.rs's map (see `read_map`).
fn module_map() -> ModuleMap {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let text = std::fs::read_to_string(lib).expect("read src/lib.rs");
    read_map(&text, &module_graph().into_keys().collect())
}

/// Reads a doc comment (`//!` lines) like lib.rs's: `**Bottom layer**`, `**Features**` and `**Tools**`
/// sections of bullets (`- [`name`]: …`, continued by indented and empty lines) and the
/// `**Composition root**: [`name`] …` paragraph.
fn read_map(text: &str, modules: &BTreeSet<String>) -> ModuleMap {
    let mut map = ModuleMap { bottom: Vec::new(), features: BTreeMap::new(), tools: Vec::new(), root: Vec::new() };
    #[derive(Clone, Copy, PartialEq)]
    enum Section {
        None,
        Bottom,
        Features,
        Tools,
    }
    let (mut section, mut in_bullet) = (Section::None, false);
    // (section, the bullet's head names, its text)
    let mut bullets: Vec<(Section, Vec<String>, String)> = Vec::new();
    for line in text.lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.strip_prefix(' ').unwrap_or(line);
        if line.starts_with("**") {
            section = match line {
                l if l.starts_with("**Bottom layer**") => Section::Bottom,
                l if l.starts_with("**Features**") => Section::Features,
                l if l.starts_with("**Tools**") => Section::Tools,
                l if l.starts_with("**Composition root**") => {
                    let head = l.split(']').next().unwrap_or_default();
                    map.root.extend(backticked(head));
                    Section::None
                }
                _ => Section::None,
            };
        } else if let Some(item) = line.strip_prefix("- ").filter(|_| section != Section::None) {
            let head = item.split(": ").next().unwrap_or_default();
            let names: Vec<String> =
                backticked(head).into_iter().filter(|n| !n.is_empty() && !n.contains("::")).collect();
            bullets.push((section, names, item.to_string()));
        } else if line.starts_with(' ') || line.is_empty() {
            if let Some((_, _, text)) = bullets.last_mut().filter(|_| in_bullet) {
                text.push(' ');
                text.push_str(line.trim());
            }
            continue;
        }
        // A bullet goes on over indented and empty lines; a marker or a paragraph line ends it.
        in_bullet = line.starts_with("- ") && section != Section::None;
    }
    for (section, names, text) in bullets {
        match section {
            Section::Bottom => map.bottom.push(names),
            Section::Features => {
                for name in names {
                    let mut uses = uses_of(&text, modules);
                    uses.remove(&name);
                    map.features.insert(name, uses);
                }
            }
            Section::Tools => map.tools.extend(names),
            Section::None => {}
        }
    }
    map
}

#[test]
fn lib_rs_maps_every_module_once() {
    let map = module_map();
    for (m, bottom) in [("config", true), ("http", true), ("media", true), ("chat", false), ("transcode", false)] {
        assert_eq!(map.is_bottom(m), bottom, "lib.rs's bottom layer, read as {:?}", map.bottom);
        assert_eq!(map.features.contains_key(m), !bottom, "lib.rs's features, read as {:?}", map.features);
    }
    assert_eq!(map.root, [ROOT], "lib.rs's composition root");
    assert_eq!(map.tools, TOOLS, "lib.rs's tools");
    let mut named: Vec<&String> =
        map.bottom_modules().chain(map.features.keys()).chain(&map.tools).chain(&map.root).collect();
    named.sort();
    let modules: Vec<String> = module_graph().into_keys().collect();
    let mut twice = named.clone();
    twice.dedup();
    assert_eq!(twice.len(), named.len(), "lib.rs names a module in two places: {named:?}");
    let missing: Vec<&String> = modules.iter().filter(|m| !named.contains(m)).collect();
    let unknown: Vec<&&String> = named.iter().filter(|m| !modules.contains(m)).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "lib.rs's map lacks {missing:?}; names {unknown:?}, which are no modules"
    );
}

#[test]
fn the_bottom_layer_keeps_the_order_lib_rs_lists() {
    // "A module may use the ones listed before it": a bottom module imports only bottom modules of
    // an earlier bullet (no feature, and not a peer of its own bullet).
    let (map, graph) = (module_map(), module_graph());
    let mut wrong = Vec::new();
    for m in map.bottom_modules() {
        let rank = map.rank(m).expect("a bottom module");
        for d in graph.get(m).unwrap_or_else(|| panic!("bottom module {m} is missing")) {
            match map.rank(d) {
                Some(r) if r < rank => {}
                Some(_) => wrong.push(format!("{m} → {d} (listed after it in lib.rs)")),
                None => wrong.push(format!("{m} → {d} (a feature)")),
            }
        }
    }
    assert!(wrong.is_empty(), "bottom-layer imports against lib.rs's order:\n{}", wrong.join("\n"));
}

#[test]
fn features_import_what_lib_rs_says_they_use() {
    let (map, graph) = (module_map(), module_graph());
    let mut wrong = Vec::new();
    for (feature, uses) in &map.features {
        let imports: BTreeSet<&String> = graph[feature].iter().filter(|d| !map.is_bottom(d)).collect();
        for d in &imports {
            if !uses.contains(*d) {
                wrong.push(format!("{feature} imports {d}, which its bullet in lib.rs does not say it uses"));
            }
        }
        for u in uses {
            if !imports.contains(u) {
                wrong.push(format!("lib.rs says {feature} uses {u}, but it imports none of it"));
            }
        }
    }
    assert!(wrong.is_empty(), "lib.rs's map and the imports disagree:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_reads_lib_rs_uses() {
    let modules: BTreeSet<String> = ["a", "b", "c", "d"].map(str::to_string).into();
    let uses = |t: &str| uses_of(t, &modules).into_iter().collect::<Vec<_>>();
    assert_eq!(uses("Uses nothing else; `a` hands it requests."), Vec::<String>::new());
    assert_eq!(uses("Uses `a` (through `b::x`, the seam; e.g. `c`) and `b` (H.264). Given `d`."), ["a", "b"]);
    assert_eq!(uses("Follows `d`; uses `c` (gives it `a::X`); reports"), ["c"]);
    assert_eq!(uses("so `d` uses `a`, `b` for those, and `c`; reads `d`"), ["a", "b", "c"]);
    assert_eq!(uses("it causes `a`, reuses `b`."), Vec::<String>::new());
}

#[test]
fn the_checker_reads_lib_rs_map() {
    let doc = "//! Intro; `z` is no bullet.\n//!\n//! **Bottom layer** (imports no feature):\n\
               //! - [`a`], [`b`]: the first (see `c::X`).\n//! - [`c`]: the second,\n\
               //!   on two lines.\n//!\n//!   ```text\n//!   a -> c\n//!   ```\n\
               //! **Features** (each owns its state; \"uses\" lists the\n//! modules it may import):\n\
               //! - [`d`]: a feature. Uses nothing else.\n//! - [`e`]: another; uses `d` (and `a`),\n\
               //!   `f`; given `g`.\n//! - [`f`]: a third.\n//!\n//! **Tools** (imported by nothing):\n\
               //! - [`t`]: a tool.\n//!\n//! **Composition root**: [`r`] builds every feature (`d`).\n\
               \npub mod a;\n//! - [`x`]: after the doc.\n";
    let modules: BTreeSet<String> = ["a", "b", "c", "d", "e", "f", "g", "r", "t", "x", "z"].map(str::to_string).into();
    let map = read_map(doc, &modules);
    assert_eq!(map.bottom, [vec!["a".to_string(), "b".to_string()], vec!["c".to_string()]]);
    assert_eq!(map.rank("c"), Some(1));
    let features: Vec<(&str, Vec<&str>)> =
        map.features.iter().map(|(f, u)| (f.as_str(), u.iter().map(String::as_str).collect())).collect();
    assert_eq!(features, [("d", vec![]), ("e", vec!["d", "f"]), ("f", vec![])]);
    assert_eq!((map.tools, map.root), (vec!["t".to_string()], vec!["r".to_string()]));
}

#[test]
fn the_module_graph_has_no_cycles() {
    let graph = module_graph();
    assert!(graph.len() > 10, "expected the crate's modules, found {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module import cycle: {}\n(graph: {graph:#?})", cycle.join(" → "));
    }
}

#[test]
fn chat_metrics_and_transcode_do_not_import_each_other() {
    let graph = module_graph();
    for a in ISOLATED {
        for b in ISOLATED {
            if a != b {
                assert!(!graph[*a].contains(*b), "{a} imports {b}: use a bus event or a handle given at construction");
            }
        }
    }
}

#[test]
fn only_the_composition_root_assembles_the_daemon() {
    let (map, graph) = (module_map(), module_graph());
    let importers: Vec<&String> = graph.iter().filter(|(_, deps)| deps.contains(ROOT)).map(|(m, _)| m).collect();
    assert!(importers.is_empty(), "only lib.rs and main.rs may use the composition root; {importers:?} do");
    assert!(!graph.contains_key("app"), "the application god object (src/app.rs) is back");
    // Every feature module is wired by the root.
    for feature in graph.keys().filter(|m| !map.is_bottom(m) && m.as_str() != ROOT && !TOOLS.contains(&m.as_str())) {
        assert!(graph[ROOT].contains(feature), "the composition root does not wire {feature}");
    }
}

#[test]
fn nothing_imports_a_tool() {
    let graph = module_graph();
    for tool in TOOLS {
        assert!(graph.contains_key(*tool), "tool module {tool} is missing");
        let importers: Vec<&String> = graph.iter().filter(|(_, deps)| deps.contains(*tool)).map(|(m, _)| m).collect();
        assert!(importers.is_empty(), "{tool} is a command-line tool; {importers:?} import it");
    }
}

#[test]
fn the_checker_sees_imports_and_ignores_comments() {
    let code = code_only("use crate::chat::Chat; // crate::metrics\n/* crate::transcode */ let x = crate::http::X;");
    assert_eq!(crate_refs(&code), BTreeSet::from(["chat".to_string(), "http".to_string()]));
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert!(find_cycle(&g).is_some());
    g.insert("b".to_string(), BTreeSet::new());
    assert!(find_cycle(&g).is_none());
}

/// The code (comments and unit tests left out) of every file under `src/<dir>` (or the file `src/<dir>.rs`).
fn sources_of(dir: &str) -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    if src.join(dir).is_dir() {
        rust_files(&src.join(dir), &mut files);
    }
    if src.join(format!("{dir}.rs")).is_file() {
        files.push(src.join(format!("{dir}.rs")));
    }
    files.into_iter().map(|f| (f.clone(), code_of(&f))).collect()
}

/// A source file's code: comments and its unit tests left out.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).expect("read a source file");
    code_only(text.split("#[cfg(test)]").next().unwrap_or_default())
}

#[test]
fn ingest_hands_media_to_the_media_plane_and_knows_no_transcoder() {
    let files = sources_of("ingest");
    assert!(files.iter().any(|(f, _)| f.ends_with("ingest/rtmp.rs")), "ingest/rtmp.rs is missing");
    assert!(files.iter().any(|(f, _)| f.ends_with("ingest/mod.rs")), "ingest/mod.rs is missing");
    for (file, code) in &files {
        assert!(
            !crate_refs(code).contains("transcode"),
            "{}: ingest imports transcode (a publisher goes live on the media plane: `media::MediaPlane::go_live`)",
            file.display()
        );
    }
}

#[test]
fn media_consumers_learn_what_is_new_from_the_feed_not_from_disk() {
    // hls, llhls, storage and simulcast follow the media plane (its feed, or its source tap); none reads a playlist or segment back from
    // disk to discover new media (segments and parts they serve or upload are mapped:
    // `http::zerocopy::MappedFile`). The only reads left are hls serving a file to a viewer: a playlist
    // copied onto the heap to serve (`LiveFiles::load`: libav rewrites playlists, which a mapping must not
    // see) and a file from disk after the stream (`from_disk`).
    for dir in ["hls", "llhls", "storage", "simulcast"] {
        let files = sources_of(dir);
        assert!(!files.is_empty(), "src/{dir} is missing");
        for (file, code) in &files {
            for needle in ["read_to_string", "HlsWritten", "Event::HlsPart"] {
                assert!(!code.contains(needle), "{} uses {needle}", file.display());
            }
            let reads = code.matches("fs::read(").count();
            let allowed = if file.ends_with("src/hls.rs") { 2 } else { 0 };
            assert!(
                reads <= allowed,
                "{} reads files back {reads} times (allowed: {allowed}, serving)",
                file.display()
            );
        }
    }
    // And the muxer deletes nothing: retention (media::retention) owns deletion.
    for (file, code) in sources_of("transcode") {
        assert!(!code.contains("delete_segments"), "{} turns on libav's delete_segments", file.display());
    }
}

/// A module inside a feature, as the path of names below the feature's root (`[]`: its `mod.rs`).
type ModPath = Vec<String>;

/// The modules a `use`-style path names, starting at `text` (`super::a::{b, c::D}`, `self::x`, `a::b`)
/// and read relative to `base`: each ends at the longest prefix that is a file of the feature.
fn path_targets(text: &str, base: ModPath, modules: &BTreeSet<ModPath>, out: &mut BTreeSet<ModPath>) {
    let mut cur = base;
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(inner) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut start = 0usize;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        path_targets(&inner[start..i], cur.clone(), modules, out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        path_targets(&inner[start..i], cur.clone(), modules, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            break;
        }
        if name == "super" {
            cur.pop();
        } else if name != "self" {
            let mut next = cur.clone();
            next.push(name.clone());
            if !modules.contains(&next) {
                break;
            }
            cur = next;
        }
        rest = &rest[name.len()..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out.insert(cur);
}

/// Where `needle` starts a path in `code`: not in the middle of a name or of a longer path.
fn path_starts<'a>(code: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    code.match_indices(needle).map(|(i, _)| i).filter(move |&i| {
        let before = code[..i].chars().last();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    })
}

/// The modules (files) of one file's code refers to: `crate::<feature>::…`, `super::…`, `self::…`
/// and, for a folder's `mod.rs`, its child modules by name (`child::…`).
fn file_refs(code: &str, feature: &str, me: &ModPath, modules: &BTreeSet<ModPath>) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    let absolute = format!("crate::{feature}::");
    for i in path_starts(code, &absolute) {
        path_targets(&code[i + absolute.len()..], Vec::new(), modules, &mut out);
    }
    for needle in ["super::", "self::"] {
        for i in path_starts(code, needle) {
            path_targets(&code[i..], me.clone(), modules, &mut out);
        }
    }
    for child in modules.iter().filter(|m| m.len() == me.len() + 1 && m.starts_with(me)) {
        let needle = format!("{}::", child[me.len()]);
        for i in path_starts(code, &needle) {
            path_targets(&code[i..], me.clone(), modules, &mut out);
        }
    }
    out.remove(me);
    out
}

fn mod_name(m: &ModPath) -> String {
    if m.is_empty() {
        "mod".to_string()
    } else {
        m.join("::")
    }
}

/// The file-level import graph inside `src/<feature>/` (`mod.rs`, or `src/<feature>.rs`, is the folder's module; unit tests
/// and comments left out), by module name (`mod` for the feature's root).
fn feature_graph(feature: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(feature);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    // `src/<feature>.rs` with its children in `src/<feature>/` is the same as `src/<feature>/mod.rs`.
    let outer = root.with_extension("rs");
    if outer.is_file() {
        files.push(outer.clone());
    }
    let path_of = |f: &Path| -> ModPath {
        if f == outer {
            return Vec::new();
        }
        let rel = f.strip_prefix(&root).expect("under the feature");
        let mut parts: ModPath = rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        parts
    };
    let modules: BTreeSet<ModPath> = files.iter().map(|f| path_of(f)).collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let me = path_of(file);
        let text = std::fs::read_to_string(file).expect("read a source file");
        let code = code_only(text.split("#[cfg(test)]").next().unwrap_or_default());
        let refs = file_refs(&code, feature, &me, &modules);
        graph.insert(mod_name(&me), refs.iter().map(mod_name).collect());
    }
    graph
}

#[test]
fn the_checker_reads_paths_inside_a_feature() {
    let modules: BTreeSet<ModPath> =
        [vec![], vec!["a".into()], vec!["b".into()], vec!["w".into()], vec!["w".into(), "p".into()]].into();
    let names = |code: &str, me: ModPath| -> Vec<String> {
        file_refs(&code_only(code), "f", &me, &modules).iter().map(mod_name).collect()
    };
    let code = "use super::{a::X, Y};\nuse crate::f::b::{self};\nuse hw::a::Z; // super::w\nlet q = x.super_::b;";
    assert_eq!(names(code, vec!["w".into()]), ["mod", "a", "b"]);
    assert_eq!(names("use super::super::a;\nuse self::Q;", vec!["w".into(), "p".into()]), ["a"]);
    assert_eq!(
        names("pub mod a;\nuse crate::x::b::C;\nlet n = b::f();\npub use self::w::p::T;", vec![]),
        ["b", "w::p"]
    );
}

/// Back-edges of import cycles not broken yet, as (folder, from, to). The check leaves them out;
/// each must still exist, so this list only shrinks. Empty: the metrics children (`viewers`,
/// `playback`, `health`) take their own state and what they read, never `&Metrics`.
const KNOWN_BACK_EDGES: &[(&str, &str, &str)] = &[];

/// Folders whose `mod.rs` (or a nested folder's `mod.rs`) is the folder's front: it holds the
/// feature's state and what its files share *and* wires or re-exports those files (`pub use
/// settings::X`, `child::routes(...)`), so its paths to its own children are left out of their check:
/// only cycles between the files themselves count there. In every other folder a `mod.rs`'s paths to
/// its children are edges like any other (`transcode`, `metrics`, `media`: `mod.rs` holds what the
/// files share and imports none of them, and a file names a sibling by its own path, `super::feed::X`,
/// not through `mod.rs`'s re-exports). Each listed folder must still need it: this list only shrinks.
const FRONT_MOD_RS: &[&str] = &[
    "api",
    "chat",
    "cluster",
    "config",
    "events",
    "federation",
    "hardware",
    "http",
    "import",
    "indieauth",
    "ingest",
    "llhls",
    "notifications",
    "replays",
    "schedule",
    "simulcast",
    "storage",
    "webhooks",
    "webrtc",
    "whep",
    "yp",
];

/// Every folder of `src/` (each feature's, and the bottom layer's).
fn module_folders() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs: Vec<String> = std::fs::read_dir(&src)
        .expect("read src")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().expect("a name").to_string_lossy().to_string())
        .collect();
    dirs.sort();
    dirs
}

/// Whether `to` is a child module of `from` (`mod` → `x`, `a` → `a::x`).
fn is_child(from: &str, to: &str) -> bool {
    match from {
        "mod" => !to.contains("::"),
        _ => to.strip_prefix(from).and_then(|r| r.strip_prefix("::")).is_some_and(|r| !r.contains("::")),
    }
}

#[test]
fn no_folder_has_import_cycles_between_its_files() {
    let folders = module_folders();
    for expected in ["chat", "cluster", "replays", "transcode", "metrics"] {
        assert!(folders.iter().any(|f| f == expected), "src/{expected}/ is missing: {folders:?}");
    }
    for front in FRONT_MOD_RS {
        assert!(folders.iter().any(|f| f == front), "FRONT_MOD_RS names src/{front}/, which is gone");
    }
    let mut cycles = Vec::new();
    for feature in folders.iter().map(String::as_str) {
        let mut graph = feature_graph(feature);
        assert!(graph.contains_key("mod"), "src/{feature}/ has no mod.rs (nor src/{feature}.rs): {graph:?}");
        for (_, from, to) in KNOWN_BACK_EDGES.iter().filter(|(f, _, _)| *f == feature) {
            let edges = graph.get_mut(*from).unwrap_or_else(|| panic!("src/{feature}: no module {from}"));
            assert!(edges.remove(*to), "src/{feature}: {from} no longer imports {to}; drop it from KNOWN_BACK_EDGES");
        }
        if FRONT_MOD_RS.contains(&feature) {
            assert!(
                find_cycle(&graph).is_some(),
                "src/{feature}/'s files import each other without a cycle even through mod.rs: drop it from FRONT_MOD_RS"
            );
            for (from, edges) in graph.iter_mut() {
                edges.retain(|to| !is_child(from, to));
            }
        }
        if let Some(cycle) = find_cycle(&graph) {
            cycles.push(format!("src/{feature}/: {}", cycle.join(" → ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between files (put what both sides need in a file both can import, or in mod.rs \
         when mod.rs imports neither):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_checker_leaves_a_front_mod_rs_out_only_towards_its_children() {
    assert!(is_child("mod", "settings") && is_child("activities", "activities::accept"));
    assert!(!is_child("mod", "activities::accept") && !is_child("activities", "api") && !is_child("api", "mod"));
    assert!(!is_child("act", "activities::accept"));
}

/// Each feature owns its setters: the server feature's table (`api/setters.rs`) keeps only the
/// instance and server ones (the video ones, on behalf of transcode, which sees no HTTP types, are
/// `api/video.rs`'s); every other section's setters are in the feature that owns the section.
#[test]
fn each_feature_owns_the_setters_of_its_section() {
    // (setter path prefix, the file that owns it)
    let owners: &[(&str, &str)] = &[
        ("\"chat/", "chat/settings.rs"),
        ("\"federation/", "federation/settings.rs"),
        ("\"notifications/", "notifications/settings.rs"),
        ("\"s3\"", "storage/settings.rs"),
        ("\"directoryenabled\"", "yp/settings.rs"),
        ("\"directoryurl\"", "yp/settings.rs"),
        ("\"video/", "api/video.rs"),
        ("\"simulcast/", "simulcast/settings.rs"),
    ];
    let files: Vec<_> = sources_of("api").into_iter().filter(|(f, _)| f.ends_with("api/setters.rs")).collect();
    assert_eq!(files.len(), 1, "api/setters.rs is missing");
    for (prefix, owner) in owners {
        let owner_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(owner);
        let text = std::fs::read_to_string(&owner_file).unwrap_or_else(|_| panic!("{owner} is missing"));
        assert!(code_only(&text).contains(prefix), "{owner} does not define the {prefix} setters");
        for (file, code) in files.iter().filter(|(f, _)| !f.ends_with(owner)) {
            assert!(!code.contains(prefix), "{} names a {prefix} setter, which {owner} owns", file.display());
        }
    }
    // The plumbing is the bottom layer's, and there is one table type.
    for (file, code) in sources_of("api").into_iter().chain(sources_of("chat")).chain(sources_of("federation")) {
        assert!(!code.contains("pub struct Setter"), "{} defines its own Setter (use http::setters)", file.display());
    }
}

/// Ways to start or stop a task outside the one lifecycle (`src/tasks.rs`): a spawn, a task set, a
/// tracker or a root token of one's own, an abort.
const TASK_NEEDLES: &[&str] = &[
    "tokio::spawn",
    "task::spawn(",
    "spawn_local",
    "JoinSet",
    "TaskTracker::new",
    ".abort()",
    "CancellationToken::new",
];

/// Files allowed one of `TASK_NEEDLES`, with the reason. Unit tests (after `#[cfg(test)]`) are not
/// checked: they run their own helpers on the test runtime.
const TASK_ALLOWED: &[(&str, &str)] = &[("tasks.rs", "the lifecycle itself")];

#[test]
fn one_way_to_spawn_a_task() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(src.join("tasks.rs").is_file(), "src/tasks.rs is missing");
    let mut found = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src").to_string_lossy().to_string();
        if TASK_ALLOWED.iter().any(|(f, _)| *f == rel) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read a source file");
        let code = code_only(text.split("#[cfg(test)]").next().unwrap_or_default());
        for needle in TASK_NEEDLES {
            if code.contains(needle) {
                found.push(format!("{rel}: {needle}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "spawn long-running tasks on `tasks::Tasks` (in their shutdown stage) and stop them with its tokens:\n{}",
        found.join("\n")
    );
}

/// Every file of `src/` (path relative to `src/`, code without comments and unit tests).
fn all_sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
            (rel, code_of(&f))
        })
        .collect()
}

/// The string literals of `code` (their text between the quotes; raw strings are read as plain
/// ones, which is enough for the names looked for here).
fn literals(code: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = j.min(bytes.len());
            out.push((i, &code[start..end]));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// The setter paths named in `files` (`Setter::new("name"`, `"/api/admin/config/<name>"`, and in a
/// file that registers config routes every `"group/name"` literal), and the setter groups
/// (`"/api/admin/config/<group>/{…}"`, and the `group` of every `group/name`).
fn setting_names(files: &[(String, String)]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut names, mut groups) = (BTreeSet::new(), BTreeSet::new());
    let is_path =
        |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '/');
    for (_, code) in files {
        for ctor in ["Setter::new(", "Setter::restart("] {
            for (i, _) in code.match_indices(ctor) {
                if let Some((_, lit)) = literals(&code[i..]).first() {
                    if is_path(lit) {
                        names.insert(lit.to_string());
                    }
                }
            }
        }
        let registers = code.contains("/api/admin/config/");
        for (_, lit) in literals(code) {
            if let Some(rest) = lit.strip_prefix("/api/admin/config/") {
                match rest.split_once('/') {
                    Some((group, tail)) if tail.starts_with('{') => drop(groups.insert(group.to_string())),
                    _ if is_path(rest) => drop(names.insert(rest.to_string())),
                    _ => {}
                }
            } else if registers && is_path(lit) && lit.matches('/').count() == 1 && !lit.starts_with('/') {
                names.insert(lit.to_string());
            }
        }
    }
    for n in &names {
        if let Some((group, _)) = n.split_once('/') {
            groups.insert(group.to_string());
        }
    }
    (names, groups)
}

/// Places in `code` where a string literal that is a setter path (`names`, or starting with
/// `<group>/` for a group of `groups`) is compared or listed to be compared: `== "x"`, `"x" !=`,
/// `"x" | …` (patterns, `matches!`), `"x" =>`, `&["x", …]`, `matches!(v, "x")`, `.contains(&"x")`.
fn setting_name_matches(code: &str, names: &BTreeSet<String>, groups: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for (at, lit) in literals(code) {
        let named = names.contains(lit) || groups.iter().any(|g| lit.starts_with(&format!("{g}/")));
        if !named {
            continue;
        }
        let before = code[..at].trim_end();
        let after = code[(at + lit.len() + 2).min(code.len())..].trim_start();
        let in_matches = before.ends_with(',')
            && before.rfind("matches!(").is_some_and(|m| !before[m..].contains(')') && !before[m..].contains(';'));
        let compared = ["==", "!=", "|", "&[", "(&"].iter().any(|op| before.ends_with(op))
            || ["==", "!=", "|", "=>"].iter().any(|op| after.starts_with(op))
            || in_matches;
        if compared {
            found.push(lit.to_string());
        }
    }
    found
}

/// Settings changes are typed: the settings store alone announces them (`Event::SettingsChanged`,
/// which sections changed, the settings before and after), and no feature learns what changed by
/// matching a setter's name (the old `ConfigChanged { key }` and its `key == "s3"`, `TRIGGERS`
/// lists of setter paths, a setter host branching on its own setters' names). The offline tools
/// (`import`, which maps Owncast's own keys) are not features and are not checked.
#[test]
fn settings_changes_are_typed_and_announced_by_the_store_alone() {
    let files = all_sources();
    assert!(files.iter().any(|(f, _)| f == "store/settings.rs"), "src/store/settings.rs is missing");
    let (names, groups) = setting_names(&files);
    for n in ["s3", "streamtitle", "serverurl", "directoryenabled", "adminpass", "replay/maxgigabytes", "chat/disable"]
    {
        assert!(names.contains(n), "the setter {n} was not found: {names:?}");
    }
    for g in ["schedule", "replay", "video", "simulcast"] {
        assert!(groups.contains(g), "the setter group {g} was not found: {groups:?}");
    }
    let mut bad = Vec::new();
    for (file, code) in &files {
        if code.contains("ConfigChanged") {
            bad.push(format!("{file}: ConfigChanged (settings changes are `Event::SettingsChanged`)"));
        }
        if file != "store/settings.rs" {
            for needle in
                ["SettingsChange::between(", "publish(Event::SettingsChanged", "Event::SettingsChanged(SettingsChange"]
            {
                if code.contains(needle) {
                    bad.push(format!("{file}: {needle} (only the settings store announces a change)"));
                }
            }
        }
        if TOOLS.iter().any(|t| file.starts_with(&format!("{t}/")) || *file == format!("{t}.rs")) {
            continue;
        }
        for name in setting_name_matches(code, &names, &groups) {
            bad.push(format!("{file}: matches the setter name \"{name}\" (compare typed settings instead)"));
        }
    }
    assert!(bad.is_empty(), "settings changes matched by name or announced outside the store:\n{}", bad.join("\n"));
}

#[test]
fn the_checker_sees_setting_names_compared() {
    let names: BTreeSet<String> =
        ["s3", "videoservingendpoint", "directoryenabled", "serverurl", "streamtitle"].map(String::from).into();
    let groups: BTreeSet<String> = ["replay", "schedule"].map(String::from).into();
    let old = [
        r#"Some(Event::ConfigChanged { key }) if key == "s3" || key == "videoservingendpoint" => {}"#,
        r#"const TRIGGERS: &[&str] = &["directoryenabled", "serverurl", "directoryurl"];"#,
        r#"if name == "streamtitle" { publish() }"#,
        r#"if matches!(name, "replay/maxgigabytes" | "replay/retentiondays") {}"#,
        r#"if matches!(key, "s3") {}"#,
        r#"match key.as_str() { "serverurl" => ping(), _ => {} }"#,
        r#"if key.starts_with("schedule/") || "s3" != key {}"#,
        r#"if WATCHED.contains(&"serverurl") {}"#,
    ];
    for snippet in old {
        assert!(!setting_name_matches(snippet, &names, &groups).is_empty(), "not seen: {snippet}");
    }
    let fine = [
        r#"Setter::new("s3", "Object storage", ValueDoc::Json(S3), apply)"#,
        r#"apply_named(&server, "streamtitle", value).await"#,
        r##"let schema = r#"{"required":["s3","serverurl"]}"#;"##,
        r#"format!("/api/admin/config/{name}")"#,
        r#"if change.changed(|s| &s.storage.s3) { reload() }"#,
    ];
    for snippet in fine {
        assert!(setting_name_matches(snippet, &names, &groups).is_empty(), "flagged: {snippet}");
    }
}

/// What is running (the ladder, the segment length, the latency mode, the real-time variant) is read from
/// the live broadcast's profile (`media::Profile`), which the transcoder decides once, at its start. The
/// settings' values may be read only where they are defined, set or shown as settings, by the transcoder's
/// start, and where nothing is live (what the next broadcast will run).
#[test]
fn no_feature_reads_what_is_running_from_the_settings() {
    const READS: &[&str] = &["video_quality_variants", ".latency()", "realtime_variant(", "low_latency_hls()"];
    const ALLOWED: &[(&str, &str)] = &[
        ("config/", "where the settings are defined"),
        ("import/", "the Owncast importer writes settings"),
        ("api/video.rs", "the video settings' setters and their part of serverconfig"),
        ("transcode/supervisor.rs", "the transcoder decides the running profile at its start"),
        ("api/public.rs", "/api/video/variants offline: the ladder the next broadcast will run"),
        ("metrics/api.rs", "the video metrics offline: the ladder the next broadcast will run"),
        ("daemon/server.rs", "the capacity check at a claim: the ladder the claiming channel's broadcast will run"),
        ("hardware/fit/api.rs", "whether the configured ladder fits the box: the ladder the next broadcast will run"),
    ];
    let mut found = Vec::new();
    for (rel, code) in all_sources() {
        if ALLOWED.iter().any(|(prefix, _)| rel.starts_with(prefix)) {
            continue;
        }
        for read in READS {
            if code.contains(read) {
                found.push(format!("src/{rel} reads `{read}`"));
            }
        }
    }
    assert!(found.is_empty(), "read the running broadcast's profile (`media::Profile`) instead:\n{}", found.join("\n"));
}

/// The top-level modules lib.rs's doc lists after `**Server-wide**` (one per castd, not per channel).
fn server_wide_modules() -> BTreeSet<String> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let text = std::fs::read_to_string(lib).expect("read src/lib.rs");
    let paragraph: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with("//! **Server-wide**")).take_while(|l| l.trim() != "//!").collect();
    assert!(!paragraph.is_empty(), "lib.rs's doc names the server-wide modules in a `**Server-wide**` paragraph");
    backticked(&paragraph.join(" ")).into_iter().filter(|m| !m.contains(':')).collect()
}

/// The server's settings (`config::ServerSettings`, `store::settings::ServerSettingsStore`) are read
/// by the server-wide modules lib.rs lists, where they are defined (`config`, `store`), and by the
/// composition root, which lays them over each channel's settings; never by a channel's feature.
#[test]
fn only_server_wide_modules_read_the_servers_settings() {
    let allowed = server_wide_modules();
    assert!(allowed.contains("ingest") && allowed.contains("storage"), "read as {allowed:?}");
    assert!(!allowed.contains("chat") && !allowed.contains("api"), "a channel's features are no server-wide modules");
    let mut found = Vec::new();
    for (rel, code) in all_sources() {
        let top = rel.split('/').next().unwrap_or_default().trim_end_matches(".rs").to_string();
        if ["config", "store", ROOT, "lib", "main"].contains(&top.as_str()) || allowed.contains(&top) {
            continue;
        }
        if code.contains("ServerSettingsStore") || code.contains("ServerSettings") {
            found.push(format!("src/{rel} (module {top})"));
        }
    }
    assert!(found.is_empty(), "the server's settings read by a channel's feature:\n{}", found.join("\n"));
}

/// Non-static `OnceLock`s (handles the composition root fills after construction) and the places
/// that ask `is_default()`, counted in the code (unit tests left out). The limits only go down: a new
/// late-bound handle or a new "is this the default channel" branch fails here. Issue 53 brought them to
/// 1 (the chat hub's cluster link: the cluster joins after the default channel's chat exists, and an
/// edge's rooms are made by the cluster) and 3 (where a stack learns whose it is, and the `is_channel`
/// of the two features whose setters differ for a tenant), with the one registry of channels built
/// before the stacks.
const MAX_LATE_BOUND: usize = 1;
const MAX_IS_DEFAULT: usize = 3;

#[test]
fn late_bound_handles_and_default_channel_branches_do_not_grow() {
    let mut late = Vec::new();
    let mut asks = Vec::new();
    for (rel, code) in all_sources() {
        for line in code.lines() {
            let t = line.trim_start();
            if line.contains("OnceLock<")
                && !line.contains("static ")
                && !t.starts_with("use ")
                && !t.starts_with("let ")
            {
                late.push(format!("src/{rel}: {}", line.trim()));
            }
            if rel != "media/channel.rs" {
                for _ in line.matches("is_default()") {
                    asks.push(format!("src/{rel}: {}", line.trim()));
                }
            }
        }
    }
    assert!(
        late.len() <= MAX_LATE_BOUND,
        "{} late-bound handles (limit {MAX_LATE_BOUND}):\n{}",
        late.len(),
        late.join("\n")
    );
    assert!(
        asks.len() <= MAX_IS_DEFAULT,
        "{} is_default() asks (limit {MAX_IS_DEFAULT}):\n{}",
        asks.len(),
        asks.join("\n")
    );
    eprintln!("late-bound handles: {}; is_default() asks: {}", late.len(), asks.len());
}
