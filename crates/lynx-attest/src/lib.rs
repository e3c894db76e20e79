//! Signed results: ECDSA P-256 signing keys (`keys`), DSSE envelopes holding an in-toto
//! Statement v1 whose predicate is a lynx result (`envelope`), their verification, and which results
//! to believe (`trust`: finding envelopes, verifying each against the key it names, a verdict
//! saying why one is not believed).
//!
//! Verification is the only way a published figure is believed: it checks, in order, that the
//! envelope parses, its payload decodes, its signature is by the pinned key over DSSE's
//! pre-authentication encoding, its payload and statement types are lynx's, the samples file it
//! names has the digest it states, and its predicate is a result of the schema. The first step
//! that fails is named.

pub mod envelope;
pub mod files;
pub mod keys;
pub mod trust;

pub use envelope::{envelope_path, pae, seal, sign, statement, verify, Envelope, Verified, VerifyError};
pub use keys::{default_key_dir, generate, key_id, read_signing_key, read_verifying_key, KeyError};
pub use p256::ecdsa::{SigningKey, VerifyingKey};
