// Preloaded (NODE_OPTIONS="--require …/loopback.cjs") into Node peers that have no host option:
// a listen() without a host, or on 0.0.0.0 / ::, binds 127.0.0.1 instead. Load tests and interop
// tests only ever talk to loopback.
const net = require('net');
const orig = net.Server.prototype.listen;
net.Server.prototype.listen = function (...a) {
  if (typeof a[0] === 'number' || (typeof a[0] === 'string' && /^\d+$/.test(a[0]))) {
    if (typeof a[1] !== 'string') a.splice(1, 0, '127.0.0.1');
    else if (a[1] === '0.0.0.0' || a[1] === '::') a[1] = '127.0.0.1';
  } else if (a[0] && typeof a[0] === 'object' && a[0].path === undefined) {
    const h = a[0].host;
    if (!h || h === '0.0.0.0' || h === '::') a[0] = { ...a[0], host: '127.0.0.1' };
  }
  return orig.apply(this, a);
};
