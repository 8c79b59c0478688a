//! The manual's and the README's links lead somewhere: every relative link names a file of the
//! repository, and a `#anchor` into a markdown file names one of its headings. mdbook builds a
//! book with a broken link without a word, so this test is what fails instead.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The markdown files checked: README.md and everything under docs/src/.
fn pages() -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![repo().join("README.md")];
    walk(&repo().join("docs/src"), &mut out);
    out.sort();
    out
}

/// The text outside fenced code blocks and inline code, where links are links.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut code = false;
        for part in line.split('`') {
            if !code {
                out.push_str(part);
            }
            code = !code;
        }
        out.push('\n');
    }
    out
}

/// The targets of `[text](target)` links.
fn links(text: &str) -> Vec<String> {
    let text = prose(text);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_string());
        }
    }
    out
}

/// A heading's anchor as GitHub and mdbook make it: lower case, spaces to `-`, other
/// punctuation but `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_link_of_the_manual_and_the_readme_leads_somewhere() {
    let mut broken = Vec::new();
    let mut n = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            n += 1;
            let (file, frag) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let shown = page
                .strip_prefix(repo())
                .unwrap_or(&page)
                .display()
                .to_string();
            if !target.exists() {
                broken.push(format!("{shown}: ({link}): no such file"));
            } else if !frag.is_empty() && target.extension().is_some_and(|x| x == "md") {
                let t = std::fs::read_to_string(&target).unwrap();
                if !anchors(&t).iter().any(|a| a == frag) {
                    broken.push(format!("{shown}: ({link}): no heading makes #{frag}"));
                }
            }
        }
    }
    assert!(n > 50, "too few links found ({n}): the scan is broken");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_and_mdbook_make_them() {
    assert_eq!(anchor(" Why not smc_run?"), "why-not-smc_run");
    assert_eq!(
        anchor(" SMC-D: between the processes"),
        "smc-d-between-the-processes"
    );
    assert_eq!(links("[a](b.md#c) `[x](y)` [d](e)"), ["b.md#c", "e"]);
}
