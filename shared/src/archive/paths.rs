//! Lexical checks on entry paths and link targets. Terraform may unpack a module on Windows, so
//! `\` counts as a separator and drive or UNC prefixes count as absolute.

/// Why an entry path cannot stand in the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PathProblem {
    Absolute,
    Escapes,
    Nul,
}

/// Why a link target cannot be followed safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TargetProblem {
    Escapes,
    /// Empty, holding a NUL, naming the root for a hard link, or climbing with `..` after a
    /// directory name: a step through a symlink could make such a target land anywhere.
    Unclear,
}

fn is_absolute(raw: &[u8]) -> bool {
    match raw {
        [b'/' | b'\\', ..] => true,
        [drive, b':', ..] => drive.is_ascii_alphabetic(),
        _ => false,
    }
}

fn components(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    raw.split(|&b| b == b'/' || b == b'\\').filter(|c| !c.is_empty() && *c != b".")
}

/// Writes the normalised form of `raw` (`./a/./b/` becomes `a/b`) into `out` and returns how
/// many components it has; the archive root itself (`./`) has none.
pub(super) fn normalise(raw: &[u8], out: &mut String) -> Result<usize, PathProblem> {
    out.clear();
    if raw.contains(&0) {
        return Err(PathProblem::Nul);
    }
    if is_absolute(raw) {
        return Err(PathProblem::Absolute);
    }
    let mut depth = 0;
    for component in components(raw) {
        if component == b".." {
            return Err(PathProblem::Escapes);
        }
        if depth > 0 {
            out.push('/');
        }
        out.push_str(&String::from_utf8_lossy(component));
        depth += 1;
    }
    Ok(depth)
}

/// Checks that `target`, followed from a directory `base_depth` levels below the root, stays
/// inside the root. A symlink's base is its own directory; a hard link's is the root.
pub(super) fn check_target(target: &[u8], base_depth: usize, hard_link: bool) -> Result<(), TargetProblem> {
    if target.is_empty() || target.contains(&0) {
        return Err(TargetProblem::Unclear);
    }
    if is_absolute(target) {
        return Err(TargetProblem::Escapes);
    }
    let mut depth = base_depth;
    let mut descended = false;
    for component in components(target) {
        if component != b".." {
            descended = true;
            depth += 1;
        } else if descended {
            return Err(TargetProblem::Unclear);
        } else if depth == 0 {
            return Err(TargetProblem::Escapes);
        } else {
            depth -= 1;
        }
    }
    if hard_link && depth == 0 {
        return Err(TargetProblem::Unclear);
    }
    Ok(())
}
