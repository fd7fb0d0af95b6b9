//! Collecting verifier results: every problem with its location, not just the first.

#[derive(Default)]
pub struct Verifier {
    errors: Vec<String>,
}

/// How many problems a verifier lists before it summarises the rest.
const SHOWN: usize = 20;

impl Verifier {
    pub fn check(&mut self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            self.errors.push(message());
        }
    }

    pub fn error(&mut self, message: String) {
        self.errors.push(message);
    }

    /// Adds the problems `other` collected after these.
    pub fn append(&mut self, other: Verifier) {
        self.errors.extend(other.errors);
    }

    pub fn finish(self) -> Vec<String> {
        let mut errors = self.errors;
        if errors.len() > SHOWN {
            let more = errors.len() - SHOWN;
            errors.truncate(SHOWN);
            errors.push(format!("... and {more} more"));
        }
        errors
    }
}
