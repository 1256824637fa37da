// TEMPORARY STUB: replaced by the tools branch.
use super::*;
impl Tool {
    pub fn spec(self) -> ToolSpec {
        ToolSpec {
            name: self.name(),
            description: "",
            parameters: serde_json::json!({"type":"object"}),
        }
    }
    pub async fn execute(self, _args: Value, _ctx: ToolContext) -> ToolOutput {
        ToolOutput::error("stub")
    }
}
