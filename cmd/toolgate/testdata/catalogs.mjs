// An MCP server of a German or a French team's tools (argv[2]: "de" or
// "fr"), built with the TypeScript SDK of examples/servers: the tests of
// language-aware stemming (language_stem_test.go) run it behind a real
// gateway, with and without the server entry's "language".
import { McpServer } from "../../../examples/servers/node_modules/@modelcontextprotocol/sdk/dist/esm/server/mcp.js";
import { StdioServerTransport } from "../../../examples/servers/node_modules/@modelcontextprotocol/sdk/dist/esm/server/stdio.js";

const catalogs = {
  de: [
    ["rechnung_anlegen", "Legt eine neue Rechnung für einen Kunden an."],
    ["angebot_senden", "Sendet ein Angebot per E-Mail an den Kunden."],
    ["kunde_suchen", "Sucht einen Kunden nach Name oder Kundennummer."],
    ["zahlung_buchen", "Bucht einen Zahlungseingang auf ein Konto."],
    ["mahnung_erstellen", "Erstellt eine Mahnung für eine überfällige Zahlung."],
    ["bericht_exportieren", "Exportiert den Monatsbericht als PDF-Datei."],
    ["termin_planen", "Plant einen Termin im Teamkalender."],
    ["lieferschein_drucken", "Druckt den Lieferschein einer Bestellung."],
  ],
  fr: [
    ["creer_facture", "Crée une facture pour un client."],
    ["envoyer_devis", "Envoie un devis par courriel au client."],
    ["chercher_client", "Cherche un client par son nom ou son numéro."],
    ["enregistrer_paiement", "Enregistre le paiement reçu sur un compte bancaire."],
    ["relancer_impaye", "Relance les clients dont les factures sont impayées."],
    ["exporter_rapport", "Exporte le rapport mensuel en fichier PDF."],
    ["planifier_reunion", "Planifie une réunion dans l'agenda de l'équipe."],
    ["imprimer_bon_livraison", "Imprime le bon de livraison d'une commande."],
  ],
};
const lang = process.argv[2];
if (!catalogs[lang]) {
  console.error(`usage: catalogs.mjs de|fr (got ${JSON.stringify(lang)})`);
  process.exit(2);
}
const server = new McpServer({ name: "catalog-" + lang, version: "1.0.0" });
for (const [name, description] of catalogs[lang]) {
  server.registerTool(name, { description }, async () => ({ content: [{ type: "text", text: "ran " + name }] }));
}
await server.connect(new StdioServerTransport());
