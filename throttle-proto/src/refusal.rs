//! The body of every refusal of the control API: `{"error": "..."}`, a message that says
//! what to change.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub error: String,
}
