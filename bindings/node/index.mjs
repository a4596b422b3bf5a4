// ES module entry of sqlite-idempotency: the same objects as index.js.
import m from './index.js';

export const {
  VERSION,
  getLoadablePath,
  load,
  headerValue,
  Ledger,
  Attempt,
  IdempotencyError,
  LedgerError,
  LeaseLost,
  NotCommitted,
  ClaimInProgress,
  ClaimMismatch,
  OutcomeUnknown,
  NotSent,
  ToolFailed,
} = m;
export default m;
