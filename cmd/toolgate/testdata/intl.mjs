// An MCP server of tools named and described in other languages than
// English (German, French, Japanese, Chinese, Arabic, Hebrew), built with
// the TypeScript SDK of examples/servers: the tests of tools and queries
// beyond ASCII (language_test.go) run it as a real stdio backend.
import { McpServer } from "../../../examples/servers/node_modules/@modelcontextprotocol/sdk/dist/esm/server/mcp.js";
import { StdioServerTransport } from "../../../examples/servers/node_modules/@modelcontextprotocol/sdk/dist/esm/server/stdio.js";

console.warn = () => {}; // the SDK warns of each name outside A-Z a-z 0-9 _ - . on stderr

const server = new McpServer({ name: "intl", version: "1.0.0" });
const tools = [
  ["dateien_lesen", "Liest den vollständigen Inhalt einer Datei aus dem Dateisystem."],
  ["straße_suchen", "Sucht eine Straße im Stadtplan und gibt die Postleitzahl zurück."],
  ["café", "Commande un café au bar de l'équipe."],
  ["天気を取得", "指定した都市の現在の天気と気温を取得します。東京、大阪、札幌などに対応しています。"],
  ["翻译文本", "将文本翻译成另一种语言，支持中文、英文和日文。"],
  ["ترجمة_النص", "ترجمة النص من العربية إلى الإنجليزية أو الفرنسية."],
  ["שלח_הודעה", "שולח הודעה לערוץ הצוות."],
];
for (const [name, description] of tools) {
  server.registerTool(name, { description }, async () => ({ content: [{ type: "text", text: "ran " + name }] }));
}
await server.connect(new StdioServerTransport());
