//! The MQTT publisher and the OTLP push as the preferences `mqtt` and `otlp` say: each started
//! when its preference is set, restarted when it changes, stopped when it is cleared. The tray
//! app runs this; `wattbar-cli serve` too, for whichever of the two its flags do not set.

use crate::mqtt::{self, MqttConfig};
use crate::otlp::{self, OtlpConfig};
use std::time::Duration;
use tokio::sync::watch;
use wattbar_core::{MqttPref, OtlpPref};
use wattbar_engine::{EngineReader, Error};

/// The broker config a preference gives on this machine (`host_name`).
pub fn mqtt_config(pref: &MqttPref, host_name: &str) -> Result<MqttConfig, Error> {
    let mut c = MqttConfig::from_url(&pref.url, host_name)?;
    c.password = pref
        .password
        .clone()
        .and_then(|p| wattbar_core::secret::Bound::new(&c.broker(), p));
    if let Some(prefix) = &pref.topic_prefix {
        c.topics = mqtt::discovery::Topics::new(prefix, mqtt::DISCOVERY_PREFIX, &c.topics.node);
    }
    if let Some(id) = &pref.client_id {
        c.client_id = id.clone();
    }
    c.interval = Duration::from_millis(pref.interval_ms);
    Ok(c)
}

/// The push config a preference gives on this machine.
pub fn otlp_config(pref: &OtlpPref, host_name: &str) -> Result<OtlpConfig, Error> {
    let mut c = OtlpConfig::new(&pref.endpoint, host_name)?.with_headers(pref.headers.clone())?;
    c.interval = Duration::from_millis(pref.interval_ms);
    Ok(c)
}

/// This machine's name for topics and resources.
pub fn this_host() -> String {
    crate::summary::host_name().unwrap_or_else(|| "wattbar".to_string())
}

/// What to follow: `false` where the command line set it instead.
#[derive(Debug, Clone, Copy)]
pub struct Follow {
    pub mqtt: bool,
    pub otlp: bool,
}

/// Follows the preferences until `stop` completes (or the engine stops), then stops what runs
/// (a last `offline`, a last push).
pub async fn follow(
    engine: EngineReader,
    follow: Follow,
    stop: impl std::future::Future<Output = ()> + Send,
) {
    tokio::pin!(stop);
    let host = this_host();
    let mut prefs_rx = engine.preferences();
    let mut mqtt_pref: Option<MqttPref> = None;
    let mut otlp_pref: Option<OtlpPref> = None;
    let mut mqtt_task: Option<(watch::Sender<bool>, tokio::task::JoinHandle<()>)> = None;
    let mut otlp_push: Option<otlp::Otlp> = None;
    loop {
        let (mqtt_now, otlp_now) = {
            let prefs = prefs_rx.borrow_and_update();
            (prefs.mqtt.clone(), prefs.otlp.clone())
        };
        if follow.mqtt && mqtt_now != mqtt_pref {
            if let Some((stop_tx, task)) = mqtt_task.take() {
                let _ = stop_tx.send(true);
                let _ = task.await;
            }
            mqtt_pref = mqtt_now;
            if let Some(pref) = &mqtt_pref {
                match mqtt_config(pref, &host) {
                    Ok(c) => {
                        tracing::info!(
                            "mqtt: publishing to {} under {}/",
                            c.broker(),
                            c.topics.prefix
                        );
                        let (stop_tx, mut stop_rx) = watch::channel(false);
                        let task = tokio::spawn(mqtt::run(c, engine.clone(), async move {
                            let _ = stop_rx.wait_for(|s| *s).await;
                        }));
                        mqtt_task = Some((stop_tx, task));
                    }
                    Err(e) => tracing::warn!("mqtt is off: {e}"),
                }
            }
        }
        if follow.otlp && otlp_now != otlp_pref {
            if let Some(push) = otlp_push.take() {
                push.shutdown().await;
            }
            otlp_pref = otlp_now;
            if let Some(pref) = &otlp_pref {
                match otlp_config(pref, &host).and_then(|c| {
                    tracing::info!(
                        "otlp: pushing to {} every {} s",
                        c.endpoint,
                        c.interval.as_secs_f64()
                    );
                    otlp::start(&c, engine.clone())
                }) {
                    Ok(push) => otlp_push = Some(push),
                    Err(e) => tracing::warn!("otlp is off: {e}"),
                }
            }
        }
        tokio::select! {
            changed = prefs_rx.changed() => if changed.is_err() { break },
            _ = &mut stop => break,
        }
    }
    if let Some((stop_tx, task)) = mqtt_task {
        let _ = stop_tx.send(true);
        let _ = task.await;
    }
    if let Some(push) = otlp_push {
        push.shutdown().await;
    }
}
