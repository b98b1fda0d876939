// Promise.withResolvers (ES2024) is in Node 22, not in the Node 20 this machine has; a few of libp2p's transitive
// dependencies (it-queue, through mortice) call it. The standard's own definition, only where it is missing.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers () {
    let resolve, reject
    const promise = new this((res, rej) => { resolve = res; reject = rej })
    return { promise, resolve, reject }
  }
}
