//! The Python docs of the native module are written once, in the hand-written stub
//! `python/keyshared/_core.pyi`. The build script (build.rs) reads the stub's docstrings (the module's, and
//! those of its functions, classes, methods, properties and attributes) and writes each, cleaned
//! as `inspect.cleandoc` cleans it, to `$OUT_DIR/stub_docs/<item>.txt`, where `<item>` is
//! `name` or `Class.name` (`_core` for the module). The bindings take them with
//! `#[doc = stub_doc!("Class.name")]` (lib.rs), and the build fails, naming the item
//! and the file, when a binding asks for a docstring the stub does not have.
//!
//! The reader knows just the Python a stub is made of: `class` and `def` headers (on one line or
//! several), decorators, annotated names, comments and string literals.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::exit;

/// Writes the stub's docstrings for the crate at `$CARGO_MANIFEST_DIR` to `$OUT_DIR`; exits
/// with the missing ones named when a binding asks for one the stub lacks.
pub fn write() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let stub = manifest.join("../../python/keyshared/_core.pyi");
    let sources = manifest.join("src");
    println!("cargo:rerun-if-changed={}", stub.display());
    println!("cargo:rerun-if-changed={}", sources.display());

    let text = fs::read_to_string(&stub)
        .unwrap_or_else(|e| fail(&format!("cannot read the stub {}: {e}", stub.display())));
    let docs = docstrings(&text).unwrap_or_else(|e| fail(&format!("{}: {e}", stub.display())));

    let mut missing = Vec::new();
    for (file, item) in requested(&sources) {
        if !docs.contains_key(&item) {
            missing.push(format!(
                "{} asks for stub_doc!(\"{item}\"), but python/keyshared/_core.pyi has no \
                 docstring for `{item}`",
                file.display()
            ));
        }
    }
    if !missing.is_empty() {
        fail(&missing.join("\n"));
    }

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo")).join("stub_docs");
    // Start empty, so that a docstring taken out of the stub cannot linger here.
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out).unwrap_or_else(|e| fail(&format!("{}: {e}", out.display())));
    for (item, doc) in &docs {
        let path = out.join(format!("{item}.txt"));
        fs::write(&path, doc).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    exit(1)
}

/// Every `stub_doc!("item")` of the binding sources, with its file.
fn requested(dir: &Path) -> Vec<(PathBuf, String)> {
    const CALL: &str = "stub_doc!(\"";
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())))
        .map(|entry| entry.expect("a readable directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            found.extend(requested(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let source = fs::read_to_string(&path)
                .unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
            let mut rest = source.as_str();
            while let Some(at) = rest.find(CALL) {
                rest = &rest[at + CALL.len()..];
                let end = rest.find('"').unwrap_or(rest.len());
                found.push((path.clone(), rest[..end].to_string()));
            }
        }
    }
    found
}

/// One logical line of the stub: its indentation, its text with every string literal
/// replaced by `""`, and the value of its string literal when it is nothing else.
struct Line {
    number: usize,
    indent: usize,
    code: String,
    string: Option<String>,
}

/// The docstrings of the stub by item (`name`, `Class.name`, or `_core` for the module).
fn docstrings(text: &str) -> Result<BTreeMap<String, String>, String> {
    let lines = logical_lines(text)?;
    let mut docs = BTreeMap::new();
    let mut classes: Vec<(usize, String)> = Vec::new();
    let mut put = |item: String, raw: &str, number: usize| match docs.entry(item) {
        Entry::Occupied(e) => Err(format!(
            "line {number}: a second docstring for `{}`",
            e.key()
        )),
        Entry::Vacant(e) => {
            e.insert(cleandoc(raw).map_err(|err| format!("line {number}: {err}"))?);
            Ok(())
        }
    };
    if let Some(first) = lines.first() {
        if let Some(doc) = &first.string {
            put("_core".to_string(), doc, first.number)?;
        }
    }
    for (i, line) in lines.iter().enumerate() {
        while classes
            .last()
            .is_some_and(|(indent, _)| line.indent <= *indent)
        {
            classes.pop();
        }
        let Some(name) = defined_name(&line.code) else {
            continue;
        };
        let item = match classes.last() {
            Some((_, class)) => format!("{class}.{name}"),
            None => name.to_string(),
        };
        let next = lines.get(i + 1);
        let is_block = line.code.starts_with("def ") || line.code.starts_with("class ");
        // A block's docstring opens its body; an attribute's follows it at its own level.
        let doc = next.filter(|next| {
            if is_block {
                next.indent > line.indent && header_ends_in_colon(&line.code)
            } else {
                next.indent == line.indent
            }
        });
        if let Some(Line {
            string: Some(raw),
            number,
            ..
        }) = doc
        {
            put(item, raw, *number)?;
        }
        if line.code.starts_with("class ") {
            classes.push((line.indent, name.to_string()));
        }
    }
    Ok(docs)
}

/// The name a `def`, `class` or annotated/assigned name line defines.
fn defined_name(code: &str) -> Option<&str> {
    let rest = code
        .strip_prefix("def ")
        .or_else(|| code.strip_prefix("class "))
        .unwrap_or(code);
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let (name, after) = rest.split_at(end);
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_');
    let is_block = rest.len() != code.len();
    let is_attribute = after.starts_with(':') || after.trim_start().starts_with('=');
    (starts_well && (is_block || is_attribute)).then_some(name)
}

/// Whether a block header ends at its colon (its body on the lines below), rather than
/// carrying its body (`...`) on the same line.
fn header_ends_in_colon(code: &str) -> bool {
    code.trim_end().ends_with(':')
}

/// Splits the stub into logical lines: brackets and triple-quoted strings join physical
/// lines; comments and blank lines go.
fn logical_lines(text: &str) -> Result<Vec<Line>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut lines = Vec::new();
    let mut i = 0;
    let mut number = 1;
    while i < chars.len() {
        let start_number = number;
        let mut indent = 0;
        while i < chars.len() && chars[i] == ' ' {
            indent += 1;
            i += 1;
        }
        let mut code = String::new();
        let mut strings = Vec::new();
        let mut depth = 0usize;
        while i < chars.len() {
            match chars[i] {
                '#' => {
                    while i < chars.len() && chars[i] != '\n' {
                        i += 1;
                    }
                }
                '\n' => {
                    i += 1;
                    number += 1;
                    if depth == 0 {
                        break;
                    }
                    code.push(' ');
                }
                '\\' if chars.get(i + 1) == Some(&'\n') => {
                    i += 2;
                    number += 1;
                }
                '(' | '[' | '{' => {
                    depth += 1;
                    code.push(chars[i]);
                    i += 1;
                }
                ')' | ']' | '}' => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| format!("line {number}: `{}` closes nothing", chars[i]))?;
                    code.push(chars[i]);
                    i += 1;
                }
                '"' | '\'' => {
                    let (value, next, lines_spanned) = string_literal(&chars, i, false)
                        .map_err(|e| format!("line {number}: {e}"))?;
                    strings.push(value);
                    code.push_str("\"\"");
                    i = next;
                    number += lines_spanned;
                }
                'r' | 'R'
                    if matches!(chars.get(i + 1), Some('"' | '\''))
                        && !code.ends_with(|c: char| c.is_alphanumeric() || c == '_') =>
                {
                    let (value, next, lines_spanned) = string_literal(&chars, i + 1, true)
                        .map_err(|e| format!("line {number}: {e}"))?;
                    strings.push(value);
                    code.push_str("\"\"");
                    i = next;
                    number += lines_spanned;
                }
                c => {
                    code.push(c);
                    i += 1;
                }
            }
        }
        let code = code.trim_end().to_string();
        if code.is_empty() {
            continue;
        }
        let string = (code == "\"\"" && strings.len() == 1).then(|| strings.remove(0));
        lines.push(Line {
            number: start_number,
            indent,
            code,
            string,
        });
    }
    Ok(lines)
}

/// The value of the string literal opening at `chars[start]` (a quote), the index after it
/// and how many newlines it spans. Escapes are Python's, those a docstring uses; any other
/// is an error rather than a guess.
fn string_literal(
    chars: &[char],
    start: usize,
    raw: bool,
) -> Result<(String, usize, usize), String> {
    let quote = chars[start];
    let triple = chars.get(start + 1) == Some(&quote) && chars.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    let mut value = String::new();
    let mut newlines = 0;
    loop {
        let Some(&c) = chars.get(i) else {
            return Err("a string literal is not closed".to_string());
        };
        if c == '\n' {
            newlines += 1;
            if !triple {
                return Err("a string literal is not closed on its line".to_string());
            }
        }
        if c == quote
            && (!triple || (chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote)))
        {
            return Ok((value, i + if triple { 3 } else { 1 }, newlines));
        }
        if c == '\\' {
            let Some(&escaped) = chars.get(i + 1) else {
                return Err("a string literal ends in a backslash".to_string());
            };
            if raw {
                value.push('\\');
                value.push(escaped);
            } else {
                match escaped {
                    '\\' | '\'' | '"' => value.push(escaped),
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    '\n' => {}
                    other => return Err(format!("unsupported escape `\\{other}` in a string")),
                }
            }
            if escaped == '\n' {
                newlines += 1;
            }
            i += 2;
            continue;
        }
        value.push(c);
        i += 1;
    }
}

/// `inspect.cleandoc`: the first line's leading blanks and the other lines' common
/// indentation go, then leading and trailing empty lines.
fn cleandoc(doc: &str) -> Result<String, String> {
    if doc.contains('\t') {
        return Err("a tab in a docstring (indent with spaces)".to_string());
    }
    let lines: Vec<&str> = doc.split('\n').collect();
    let indent = |line: &str| line.chars().count() - line.trim_start().chars().count();
    let margin = lines
        .iter()
        .skip(1)
        .filter(|line| !line.trim_start().is_empty())
        .map(|line| indent(line))
        .min()
        .unwrap_or(0);
    let mut cleaned: Vec<String> = Vec::with_capacity(lines.len());
    if let Some(first) = lines.first() {
        cleaned.push(first.trim_start().to_string());
    }
    for line in lines.iter().skip(1) {
        cleaned.push(line.chars().skip(margin).collect());
    }
    while cleaned.last().is_some_and(String::is_empty) {
        cleaned.pop();
    }
    while cleaned.first().is_some_and(String::is_empty) {
        cleaned.remove(0);
    }
    Ok(cleaned.join("\n"))
}
