//! The names closest to one a user misspelled, what "did you mean" offers wherever a name is picked
//! from a set (presets, targets, phases, what `show` dumps, a package's inputs): the names within
//! three edits (Damerau-Levenshtein distance through `strsim`: a swap of two neighbours is one edit)
//! and within half their own length, nearest first, ties in the order given. A leaf.

/// The names of `names` close to `given`, nearest first.
pub fn closest<'a>(given: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut close: Vec<(usize, usize, &str)> = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| (strsim::damerau_levenshtein(given, name), i, name))
        .filter(|&(d, _, name)| d > 0 && d <= 3 && d <= name.chars().count() / 2)
        .collect();
    close.sort();
    close.into_iter().map(|(_, _, name)| name).collect()
}

/// `; did you mean `NAME`?` with the closest name, or nothing when none is close.
pub fn did_you_mean<'a>(given: &str, names: impl IntoIterator<Item = &'a str>) -> String {
    match closest(given, names).first() {
        Some(name) => format!("; did you mean `{name}`?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_names_come_first_and_far_ones_not_at_all() {
        let names = ["mk2-1500", "gc200", "bow"];
        assert_eq!(closest("gc20", names), ["gc200"]);
        assert_eq!(closest("bwo", names), ["bow"]);
        assert!(closest("xyz", names).is_empty());
        assert!(closest("nothing-like-any", names).is_empty());
        assert_eq!(did_you_mean("gc-200", names), "; did you mean `gc200`?");
        assert_eq!(did_you_mean("zzzzzz", names), "");
    }
}
