// The library's built-in tool namespaces for the system message: browser (search/open/find) and
// python, with their default descriptions and JSON Schemas (facts from openai/harmony v0.0.8).
#include "tokenizer/harmony.h"

namespace mx::harmony {

namespace {

ToolDescription tool(std::string name, std::string description, const char* schema_json) {
  return ToolDescription{.name = std::move(name),
                         .description = std::move(description),
                         .parameters = nlohmann::ordered_json::parse(schema_json, nullptr, /*allow_exceptions=*/false)};
}

}  // namespace

ToolNamespace browser_namespace() {
  ToolNamespace ns{.name = "browser", .description = std::string(R"MXD(Tool for browsing.
The `cursor` appears in brackets before each browsing display: `[{cursor}]`.
Cite information from the tool using the following format:
`【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.
Do not quote more than 10 words directly from the tool output.
sources=web (default: web))MXD"), .tools = {}};
  ns.tools.push_back(tool("search", R"MXD(Searches for information related to `query` and displays `topn` results.)MXD",
                          R"MXD({"type": "object", "properties": {"query": {"type": "string"}, "topn": {"type": "number", "default": 10}, "source": {"type": "string"}}, "required": ["query"]})MXD"));
  ns.tools.push_back(tool("open", R"MXD(Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` lines.
Valid link ids are displayed with the formatting: `【{id}†.*】`.
If `cursor` is not provided, the most recent page is implied.
If `id` is a string, it is treated as a fully qualified URL associated with `source`.
If `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on the most relevant passage, if available.
Use this function without `id` to scroll to a new location of an opened page.)MXD",
                          R"MXD({"type": "object", "properties": {"id": {"type": ["number", "string"], "default": -1}, "cursor": {"type": "number", "default": -1}, "loc": {"type": "number", "default": -1}, "num_lines": {"type": "number", "default": -1}, "view_source": {"type": "boolean", "default": false}, "source": {"type": "string"}}})MXD"));
  ns.tools.push_back(tool("find", R"MXD(Finds exact matches of `pattern` in the current page, or the page given by `cursor`.)MXD",
                          R"MXD({"type": "object", "properties": {"pattern": {"type": "string"}, "cursor": {"type": "number", "default": -1}}, "required": ["pattern"]})MXD"));
  return ns;
}

ToolNamespace python_namespace() {
  return ToolNamespace{.name = "python", .description = std::string(R"MXD(Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. This tool should be used for internal reasoning, but not for code that is intended to be visible to the user (e.g. when creating plots, tables, or files).

When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook environment. python will respond with the output of the execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to save and persist user files. Internet access for this session is UNKNOWN. Depends on the cluster.)MXD"), .tools = {}};
}

}  // namespace mx::harmony
