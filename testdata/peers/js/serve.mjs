// How writ's test peer servers (agent.mjs, interop-agent.mjs, differential.mjs)
// run: bound to 127.0.0.1 only, printing exactly one line, `READY <port>`, to
// stdout once listening (what internal/peers waits for), and exiting on
// SIGTERM/SIGINT and when stdin closes (so a test that dies does not leak the
// server) unless ignoreStdin is set.

import http from 'node:http';

// serve runs app on 127.0.0.1:port (0: any free port). Once it listens,
// ready(port) runs (to fill in the card's interfaces, which need the port)
// and the READY line is printed. A listen error is printed to stderr after
// name, and the process exits 1.
export function serve(app, { port, ignoreStdin, name, ready = () => {} }) {
  const server = http.createServer(app);
  let closing = false;
  const shutdown = () => {
    if (closing) return;
    closing = true;
    server.closeAllConnections?.();
    server.close();
    process.exit(0);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  if (!ignoreStdin) {
    process.stdin.on('end', shutdown);
    process.stdin.on('close', shutdown);
    process.stdin.on('error', shutdown);
    process.stdin.resume();
  }
  server.once('error', (e) => { process.stderr.write(`${name}: ${e.message}\n`); process.exit(1); });
  server.listen(Number.parseInt(port, 10), '127.0.0.1', () => {
    const { port: bound } = server.address();
    ready(bound);
    process.stdout.write(`READY ${bound}\n`);
  });
  return server;
}
