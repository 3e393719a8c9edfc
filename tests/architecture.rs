//! The shape of `src/`, checked: the module import graph has no cycles, the bottom layer imports no
//! feature, chat, metrics and transcode never import each other, and only the composition root
//! (`daemon`, with `lib.rs`/`main.rs`) knows the daemon's assembled state. `make lint` runs this too.
//!
//! The graph is read from the source text: every `crate::<module>` path outside comments in a file of
//! top-level module A is an edge A → module (files `src/a.rs` and `src/a/**` belong to A).
//!
//! Inside `src/transcode/` and `src/metrics/` the files' own import graph has no cycles either: there
//! a file's `super::…`, `self::…` and `crate::<feature>::…` paths (and a `mod.rs`'s paths to its
//! children) are edges to the files they name, `mod.rs` standing for its folder.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules below every feature: they may import each other (without cycles) but no feature.
const BOTTOM: &[&str] = &[
    "config",
    "store",
    "password",
    "throttle",
    "outbound",
    "markdown",
    "events",
    "stream",
    "health",
    "telemetry",
    "http",
    "tasks",
    "systemd",
    "logs",
    "media",
    "webrtc",
];
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

#[test]
fn the_module_graph_has_no_cycles() {
    let graph = module_graph();
    assert!(graph.len() > 10, "expected the crate's modules, found {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module import cycle: {}\n(graph: {graph:#?})", cycle.join(" → "));
    }
}

#[test]
fn the_bottom_layer_imports_no_feature() {
    let graph = module_graph();
    for m in BOTTOM {
        let deps = graph.get(*m).unwrap_or_else(|| panic!("bottom module {m} is missing"));
        let features: Vec<&String> = deps.iter().filter(|d| !BOTTOM.contains(&d.as_str())).collect();
        assert!(features.is_empty(), "{m} is in the bottom layer but imports {features:?}");
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
    let graph = module_graph();
    let importers: Vec<&String> = graph.iter().filter(|(_, deps)| deps.contains(ROOT)).map(|(m, _)| m).collect();
    assert!(importers.is_empty(), "only lib.rs and main.rs may use the composition root; {importers:?} do");
    assert!(!graph.contains_key("app"), "the application god object (src/app.rs) is back");
    // Every feature module is wired by the root.
    for feature in
        graph.keys().filter(|m| !BOTTOM.contains(&m.as_str()) && m.as_str() != ROOT && !TOOLS.contains(&m.as_str()))
    {
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
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("read a source file");
            let code = code_only(text.split("#[cfg(test)]").next().unwrap_or_default());
            (f, code)
        })
        .collect()
}

#[test]
fn ingest_protocols_hand_media_on_without_reaching_into_the_transcoder() {
    let files = sources_of("ingest");
    assert!(files.iter().any(|(f, _)| f.ends_with("ingest/rtmp.rs")), "ingest/rtmp.rs is missing");
    for (file, code) in files.iter().filter(|(f, _)| !f.ends_with("ingest/mod.rs")) {
        assert!(
            !crate_refs(code).contains("transcode"),
            "{}: a protocol module imports transcode (hand media on through ingest's Feeder)",
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

/// The file-level import graph inside `src/<feature>/` (`mod.rs` is the folder's module; unit tests
/// and comments left out), by module name (`mod` for the feature's root).
fn feature_graph(feature: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(feature);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let path_of = |f: &Path| -> ModPath {
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

/// Back-edges of import cycles not broken yet, as (feature, from, to). The check leaves them out;
/// each must still exist, so this list only shrinks. Empty: the metrics children (`viewers`,
/// `playback`, `health`) take their own state and what they read, never `&Metrics`.
const KNOWN_BACK_EDGES: &[(&str, &str, &str)] = &[];

#[test]
fn transcode_and_metrics_have_no_import_cycles_between_their_files() {
    for feature in ["transcode", "metrics"] {
        let mut graph = feature_graph(feature);
        assert!(graph.len() > 5, "expected the files of src/{feature}, found {graph:?}");
        for (_, from, to) in KNOWN_BACK_EDGES.iter().filter(|(f, _, _)| *f == feature) {
            let edges = graph.get_mut(*from).unwrap_or_else(|| panic!("src/{feature}: no module {from}"));
            assert!(edges.remove(*to), "src/{feature}: {from} no longer imports {to}; drop it from KNOWN_BACK_EDGES");
        }
        if let Some(cycle) = find_cycle(&graph) {
            panic!("import cycle in src/{feature}: {}\n(graph: {graph:#?})", cycle.join(" → "));
        }
    }
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
            let text = std::fs::read_to_string(&f).expect("read a source file");
            (rel, code_only(text.split("#[cfg(test)]").next().unwrap_or_default()))
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
