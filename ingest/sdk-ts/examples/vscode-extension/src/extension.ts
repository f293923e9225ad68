// An editor plugin embedding @rtrl/sdk: one client per extension host, its spool in the
// extension's global storage (survives a crash of the host), the user's privacy setting followed
// live, closed with a deadline when the extension is deactivated.
import { Client, type EmitOptions } from "@rtrl/sdk";
import * as vscode from "vscode";

let client: Client | undefined;

function settings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("rtrl");
}

export function activate(context: vscode.ExtensionContext): void {
  const endpoint = settings().get<string>("endpoint");
  const apiKey = settings().get<string>("apiKey");
  const orgId = settings().get<string>("orgId");
  if (!endpoint || !apiKey || !orgId) return;
  client = new Client({
    endpoint, apiKey, orgId,
    spoolDir: vscode.Uri.joinPath(context.globalStorageUri, "rtrl-spool").fsPath,
    privacyMode: settings().get<boolean>("privacyMode") ?? false,
    onRejected: (rejected) => console.warn(`rtrl: ${rejected.length} events rejected`),
  });
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((change) => {
    if (client && change.affectsConfiguration("rtrl.privacyMode")) {
      client.privacyMode = settings().get<boolean>("privacyMode") ?? false;
    }
  }));
  const who: EmitOptions = { sessionId: vscode.env.sessionId, userId: vscode.env.machineId,
                             checkpointId: "ckpt-served" };
  context.subscriptions.push(vscode.commands.registerCommand(
    "rtrl.example.acceptEdit", (interactionId: string, editId: string) => {
      const status = client?.emit("edit.accepted", interactionId, { edit_id: editId }, who);
      if (status !== "queued") console.debug(`rtrl: edit.accepted ${status}`);
    }));
}

export async function deactivate(): Promise<void> {
  await client?.close(2000);  // what is not sent by then stays in the spool for next time
}
