//! The few messages of Bazel's Remote Execution API (`build.bazel.remote.execution.v2`,
//! `remote_execution.proto`) an `/ac/` entry of the remote cache is made of: an [`ActionResult`]
//! whose one [`OutputFile`] names the action's output by its path and its [`Digest`] in `/cas/`.
//!
//! Contract: field numbers and types are the proto's, so bazel-remote (which decodes and checks
//! every `/ac/` upload, and answers an entry only while the blobs it names exist) and any other
//! REAPI reader take these entries as their own. Fields this project does not use are left out;
//! decoding skips them.

/// A blob's name in the content-addressed storage: the lowercase hex SHA-256 of its bytes and its
/// size.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Digest {
    #[prost(string, tag = "1")]
    pub hash: String,
    #[prost(int64, tag = "2")]
    pub size_bytes: i64,
}

/// An output of an action: its path and the digest of its bytes.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct OutputFile {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(message, optional, tag = "2")]
    pub digest: Option<Digest>,
    #[prost(bool, tag = "4")]
    pub is_executable: bool,
    #[prost(bytes = "vec", tag = "5")]
    pub contents: Vec<u8>,
}

/// The result of an action, as the action cache holds it.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ActionResult {
    #[prost(message, repeated, tag = "2")]
    pub output_files: Vec<OutputFile>,
    #[prost(int32, tag = "4")]
    pub exit_code: i32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn an_action_result_has_the_wire_form_of_the_proto() {
        let result = ActionResult {
            output_files: vec![OutputFile {
                path: "p".to_string(),
                digest: Some(Digest {
                    hash: "h".to_string(),
                    size_bytes: 3,
                }),
                is_executable: false,
                contents: Vec::new(),
            }],
            exit_code: 0,
        };
        // Field 2, length-delimited: an OutputFile of path (field 1) "p" and digest (field 2) of
        // hash (field 1) "h" and size_bytes (field 2, varint) 3.
        let wire = [
            0x12, 0x0a, 0x0a, 0x01, b'p', 0x12, 0x05, 0x0a, 0x01, b'h', 0x10, 0x03,
        ];
        assert_eq!(result.encode_to_vec(), wire);
        assert_eq!(ActionResult::decode(&wire[..]).unwrap(), result);
    }
}
