// Preloaded (node --require) into the TypeScript SDK's example server so
// that it listens on 127.0.0.1 only: it calls listen(port) without a host,
// which would bind every interface.
const net = require('node:net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === 'number' || (typeof port === 'string' && /^\d+$/.test(port))) && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
