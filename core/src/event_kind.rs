//! The Stripe event types Claimcheck knows, as one enum: whether it acts on each (and so
//! claims it) or only records it, what names the one action an event of the type describes,
//! and which object it carries. Every place a type decides something matches on this enum,
//! so adding a type is one arm here that the compiler then walks through the rest.
//! Vocabulary: the browser bundle compiles it too.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Declares the enum and `EventKind::ALL` from one list, so that a kind cannot be added to
/// one and forgotten in the other (`parse` reads `ALL`).
macro_rules! event_kinds {
    ($(#[$enum_meta:meta])* pub enum EventKind { $($(#[$meta:meta])* $kind:ident,)+ }) => {
        $(#[$enum_meta])*
        pub enum EventKind {
            $($(#[$meta])* $kind,)+
        }

        impl EventKind {
            /// Every known type, in the order declared: the acting ones first, in the order
            /// of a purchase's life.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$kind),+];
        }
    };
}

event_kinds! {
/// A Stripe event type Claimcheck knows. A type not listed is unknown: recorded with its
/// delivery as ignored, like the telemetry types, and never claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    /// The source of truth for a Checkout payment: paid, free, or waiting for a delayed one.
    CheckoutSessionCompleted,
    /// A delayed payment (SEPA) went through.
    CheckoutSessionAsyncPaymentSucceeded,
    /// A delayed payment failed.
    CheckoutSessionAsyncPaymentFailed,
    /// A refund, full or partial, of a charge: sent once per refund, on the same charge.
    ChargeRefunded,
    /// A refund failed after it was made: its money and credits come back.
    RefundFailed,
    /// A dispute opened on a charge.
    ChargeDisputeCreated,
    /// A dispute closed, won or lost.
    ChargeDisputeClosed,
    /// The source of truth for a subscription's money: a paid invoice grants its periods'
    /// credits (also when it was paid out of band).
    InvoicePaid,
    /// A subscription invoice's payment failed: its period stays unpaid until `invoice.paid`.
    InvoicePaymentFailed,
    /// A subscription began: its status, plan and period.
    CustomerSubscriptionCreated,
    /// A subscription's status, plan or period changed; the latest by Stripe's `created` wins.
    CustomerSubscriptionUpdated,
    /// A subscription ended.
    CustomerSubscriptionDeleted,
    /// A subscription schedule was made: the phase it moves its subscription to next.
    SubscriptionScheduleCreated,
    /// A schedule's phases changed, or its next phase began; the latest by Stripe's
    /// `created` wins.
    SubscriptionScheduleUpdated,
    /// A schedule let its subscription go: nothing more is scheduled.
    SubscriptionScheduleReleased,
    /// Likewise, the schedule canceled (with its subscription).
    SubscriptionScheduleCanceled,
    /// Likewise, its last phase over.
    SubscriptionScheduleCompleted,
    /// Likewise, its subscription ended by a failed payment.
    SubscriptionScheduleAborted,
    /// Related to a Checkout payment, never its source of truth: recorded only.
    PaymentIntentSucceeded,
    /// Likewise.
    ChargeSucceeded,
    /// A refund was made; `charge.refunded` is what acts on it.
    RefundCreated,
    /// A payment attempt failed (a declined card, a returned debit): recorded with Stripe's
    /// reason, which the order's timeline shows; the Checkout Session's events act.
    PaymentIntentPaymentFailed,
    /// Likewise, for the charge.
    ChargeFailed,
    /// The same payment as `invoice.paid`, which is what acts: handling both is how credits
    /// are granted twice.
    InvoicePaymentSucceeded,
    /// An invoice was drafted; nothing is paid yet.
    InvoiceCreated,
    /// A schedule ends in seven days: a notice, its `completed`/`released` event acts.
    SubscriptionScheduleExpiring,
}
}

/// What an event of a type means to Claimcheck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Claimed and fulfilled exactly once per action.
    Acting,
    /// Recorded with its delivery, never acted on (another type is the source of truth).
    Telemetry,
}

/// What tells two actions of one acting type on one object apart (the last part of the
/// action key `<type>:<object id>[:<step>]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionStep {
    /// The action happens once per object: the key is `<type>:<object id>`.
    OncePerObject,
    /// `charge.refunded` is sent once per refund, always on the same charge, each raising
    /// the cumulative `amount_refunded`: that amount is the step.
    AmountRefunded,
    /// A subscription's (or a subscription schedule's) events are each a new state of the
    /// same object: the event's `created` (Stripe's unix seconds) and a digest of the state it
    /// sets are the step, so twins share it and later changes, even within the same second,
    /// do not.
    EventCreated,
}

impl EventKind {
    /// Stripe's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::CheckoutSessionCompleted => "checkout.session.completed",
            EventKind::CheckoutSessionAsyncPaymentSucceeded => {
                "checkout.session.async_payment_succeeded"
            }
            EventKind::CheckoutSessionAsyncPaymentFailed => "checkout.session.async_payment_failed",
            EventKind::ChargeRefunded => "charge.refunded",
            EventKind::RefundFailed => "refund.failed",
            EventKind::ChargeDisputeCreated => "charge.dispute.created",
            EventKind::ChargeDisputeClosed => "charge.dispute.closed",
            EventKind::PaymentIntentSucceeded => "payment_intent.succeeded",
            EventKind::ChargeSucceeded => "charge.succeeded",
            EventKind::RefundCreated => "refund.created",
            EventKind::PaymentIntentPaymentFailed => "payment_intent.payment_failed",
            EventKind::ChargeFailed => "charge.failed",
            EventKind::InvoicePaid => "invoice.paid",
            EventKind::InvoicePaymentFailed => "invoice.payment_failed",
            EventKind::CustomerSubscriptionCreated => "customer.subscription.created",
            EventKind::CustomerSubscriptionUpdated => "customer.subscription.updated",
            EventKind::CustomerSubscriptionDeleted => "customer.subscription.deleted",
            EventKind::InvoicePaymentSucceeded => "invoice.payment_succeeded",
            EventKind::InvoiceCreated => "invoice.created",
            EventKind::SubscriptionScheduleCreated => "subscription_schedule.created",
            EventKind::SubscriptionScheduleUpdated => "subscription_schedule.updated",
            EventKind::SubscriptionScheduleReleased => "subscription_schedule.released",
            EventKind::SubscriptionScheduleCanceled => "subscription_schedule.canceled",
            EventKind::SubscriptionScheduleCompleted => "subscription_schedule.completed",
            EventKind::SubscriptionScheduleAborted => "subscription_schedule.aborted",
            EventKind::SubscriptionScheduleExpiring => "subscription_schedule.expiring",
        }
    }

    /// The kind Stripe's type name names, if it is one Claimcheck knows.
    pub fn parse(event_type: &str) -> Option<EventKind> {
        EventKind::ALL
            .iter()
            .copied()
            .find(|kind| kind.as_str() == event_type)
    }

    pub fn role(self) -> Role {
        match self {
            EventKind::CheckoutSessionCompleted
            | EventKind::CheckoutSessionAsyncPaymentSucceeded
            | EventKind::CheckoutSessionAsyncPaymentFailed
            | EventKind::ChargeRefunded
            | EventKind::RefundFailed
            | EventKind::ChargeDisputeCreated
            | EventKind::ChargeDisputeClosed
            | EventKind::InvoicePaid
            | EventKind::InvoicePaymentFailed
            | EventKind::CustomerSubscriptionCreated
            | EventKind::CustomerSubscriptionUpdated
            | EventKind::CustomerSubscriptionDeleted
            | EventKind::SubscriptionScheduleCreated
            | EventKind::SubscriptionScheduleUpdated
            | EventKind::SubscriptionScheduleReleased
            | EventKind::SubscriptionScheduleCanceled
            | EventKind::SubscriptionScheduleCompleted
            | EventKind::SubscriptionScheduleAborted => Role::Acting,
            EventKind::PaymentIntentSucceeded
            | EventKind::ChargeSucceeded
            | EventKind::RefundCreated
            | EventKind::PaymentIntentPaymentFailed
            | EventKind::ChargeFailed
            | EventKind::InvoicePaymentSucceeded
            | EventKind::InvoiceCreated
            | EventKind::SubscriptionScheduleExpiring => Role::Telemetry,
        }
    }

    pub fn is_acting(self) -> bool {
        self.role() == Role::Acting
    }

    /// The types Claimcheck claims: what a Stripe endpoint subscribes to, and what
    /// reconciliation lists.
    pub fn acting() -> impl Iterator<Item = EventKind> {
        EventKind::ALL
            .iter()
            .copied()
            .filter(|kind| kind.is_acting())
    }

    /// What names one action of this type besides its object (`None` for telemetry: it
    /// names no action).
    pub fn action_step(self) -> Option<ActionStep> {
        match self.role() {
            Role::Telemetry => None,
            Role::Acting => Some(match self {
                EventKind::ChargeRefunded => ActionStep::AmountRefunded,
                EventKind::CustomerSubscriptionCreated
                | EventKind::CustomerSubscriptionUpdated
                | EventKind::CustomerSubscriptionDeleted
                | EventKind::SubscriptionScheduleCreated
                | EventKind::SubscriptionScheduleUpdated
                | EventKind::SubscriptionScheduleReleased
                | EventKind::SubscriptionScheduleCanceled
                | EventKind::SubscriptionScheduleCompleted
                | EventKind::SubscriptionScheduleAborted => ActionStep::EventCreated,
                EventKind::CheckoutSessionCompleted
                | EventKind::CheckoutSessionAsyncPaymentSucceeded
                | EventKind::CheckoutSessionAsyncPaymentFailed
                | EventKind::RefundFailed
                | EventKind::ChargeDisputeCreated
                | EventKind::ChargeDisputeClosed
                | EventKind::PaymentIntentSucceeded
                | EventKind::ChargeSucceeded
                | EventKind::RefundCreated
                | EventKind::PaymentIntentPaymentFailed
                | EventKind::ChargeFailed
                | EventKind::InvoicePaid
                | EventKind::InvoicePaymentFailed
                | EventKind::InvoicePaymentSucceeded
                | EventKind::InvoiceCreated
                | EventKind::SubscriptionScheduleExpiring => ActionStep::OncePerObject,
            }),
        }
    }

    /// The Stripe object an event of this type carries (`data.object.object`).
    pub fn object(self) -> &'static str {
        match self {
            EventKind::CheckoutSessionCompleted
            | EventKind::CheckoutSessionAsyncPaymentSucceeded
            | EventKind::CheckoutSessionAsyncPaymentFailed => "checkout.session",
            EventKind::ChargeRefunded | EventKind::ChargeSucceeded | EventKind::ChargeFailed => {
                "charge"
            }
            EventKind::RefundFailed | EventKind::RefundCreated => "refund",
            EventKind::ChargeDisputeCreated | EventKind::ChargeDisputeClosed => "dispute",
            EventKind::PaymentIntentSucceeded | EventKind::PaymentIntentPaymentFailed => {
                "payment_intent"
            }
            EventKind::InvoicePaid
            | EventKind::InvoicePaymentFailed
            | EventKind::InvoicePaymentSucceeded
            | EventKind::InvoiceCreated => "invoice",
            EventKind::CustomerSubscriptionCreated
            | EventKind::CustomerSubscriptionUpdated
            | EventKind::CustomerSubscriptionDeleted => "subscription",
            EventKind::SubscriptionScheduleCreated
            | EventKind::SubscriptionScheduleUpdated
            | EventKind::SubscriptionScheduleReleased
            | EventKind::SubscriptionScheduleCanceled
            | EventKind::SubscriptionScheduleCompleted
            | EventKind::SubscriptionScheduleAborted
            | EventKind::SubscriptionScheduleExpiring => "subscription_schedule",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_stripes_name() {
        for &kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(EventKind::parse("brand.new.type"), None);
        assert_eq!(EventKind::parse(""), None);
    }

    #[test]
    fn the_acting_kinds_come_first_and_each_has_its_step() {
        let acting: Vec<EventKind> = EventKind::acting().collect();
        assert_eq!(acting.len(), 18);
        assert_eq!(&EventKind::ALL[..acting.len()], &acting[..]);
        for &kind in EventKind::ALL {
            assert_eq!(kind.action_step().is_some(), kind.is_acting(), "{kind}");
        }
        assert_eq!(
            EventKind::ChargeRefunded.action_step(),
            Some(ActionStep::AmountRefunded)
        );
    }
}
