//! A Verilated model behind a thread of its own. A Verilated model is not `Send` (it is a raw
//! handle into C++), while the driver's `Device` must be: the devices of this crate keep the
//! model on a worker thread and send it one request at a time.

use crate::error::VerifError;
use nlb_driver::device::DeviceError;
use std::fmt;
use std::sync::mpsc;
use std::thread;

/// A worker thread that owns a model state `W` and answers requests `Req` with `Resp`.
pub(crate) struct ModelThread<Req, Resp> {
    req: Option<mpsc::Sender<Req>>,
    resp: mpsc::Receiver<Result<Resp, String>>,
    worker: Option<thread::JoinHandle<()>>,
    /// What the errors name ("RTL model", "board model").
    what: &'static str,
}

impl<Req: Send + 'static, Resp: Send + 'static> ModelThread<Req, Resp> {
    /// Starts thread `name`: `make` builds the state there (its error is returned here), then
    /// every request goes through `handle`.
    pub(crate) fn start<W, F, H>(
        name: &str,
        what: &'static str,
        make: F,
        mut handle: H,
    ) -> Result<ModelThread<Req, Resp>, VerifError>
    where
        F: FnOnce() -> Result<W, VerifError> + Send + 'static,
        H: FnMut(&mut W, Req) -> Result<Resp, VerifError> + Send + 'static,
    {
        let (req_tx, req_rx) = mpsc::channel::<Req>();
        let (resp_tx, resp_rx) = mpsc::channel::<Result<Resp, String>>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let worker = thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut state = match make() {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                while let Ok(r) = req_rx.recv() {
                    let out = handle(&mut state, r).map_err(|e| e.to_string());
                    if resp_tx.send(out).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| VerifError::Setup(format!("cannot start the model thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(ModelThread {
                req: Some(req_tx),
                resp: resp_rx,
                worker: Some(worker),
                what,
            }),
            Ok(Err(e)) => Err(VerifError::Setup(e)),
            Err(_) => Err(VerifError::Setup("the model thread ended".into())),
        }
    }

    /// Sends one request and waits for its answer.
    pub(crate) fn call(&mut self, r: Req) -> Result<Resp, DeviceError> {
        let what = self.what;
        let gone = || DeviceError::Protocol(format!("the {what} thread has stopped"));
        self.req
            .as_ref()
            .ok_or_else(gone)?
            .send(r)
            .map_err(|_| gone())?;
        self.resp
            .recv()
            .map_err(|_| gone())?
            .map_err(|why| DeviceError::Protocol(format!("{what}: {why}")))
    }
}

impl<Req, Resp> fmt::Debug for ModelThread<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelThread")
            .field("what", &self.what)
            .field("running", &self.worker.is_some())
            .finish_non_exhaustive()
    }
}

impl<Req, Resp> Drop for ModelThread<Req, Resp> {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop.
        self.req.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
