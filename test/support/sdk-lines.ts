/**
 * Which SDK lines this Node runs. ai 7 and @openai/agents ≥ 0.15 need Node 22 or later: their tests
 * (against the dev aliases `ai-v7` and `openai-agents-v020`) run on CI's Node 24 lane and are
 * skipped on Node 20, saying why, where ai 6 and @openai/agents 0.14 are what users can run.
 */
export const nodeMajor = Number(process.versions.node.split(".")[0]);

/** ai 7 and @openai/agents 0.20 are supported on this Node. */
export const newerSdkLines = nodeMajor >= 22;

/** Appended to a skipped suite's name, so the report says why it did not run and where it does. */
export const newerSdkLinesNote = newerSdkLines
  ? ""
  : ` [skipped: ai 7 and @openai/agents 0.20 need Node 22 or later, this is Node ${process.versions.node}; the Node 24 lane runs it: .ci/node24 npm test]`;
