// Preloaded after ../loopback.cjs (NODE_OPTIONS="--require …/loopback.cjs --require …/report-port.cjs")
// into Node peers started with port 0: prints where each server really listens, one line on
// stderr, so the interop tests never pick a port themselves (no race, no fixed port):
//   mcpbench-interop listening 127.0.0.1:40123
const net = require('net');
const orig = net.Server.prototype.listen;
net.Server.prototype.listen = function (...a) {
  this.once('listening', () => {
    const ad = this.address();
    if (ad && typeof ad === 'object') {
      process.stderr.write(`mcpbench-interop listening ${ad.address}:${ad.port}\n`);
    }
  });
  return orig.apply(this, a);
};
