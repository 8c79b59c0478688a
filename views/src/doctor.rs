//! `smcrun doctor`: host facts and live counters as checks.
