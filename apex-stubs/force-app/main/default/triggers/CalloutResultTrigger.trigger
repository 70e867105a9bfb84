/**
 * Resumes business processes when the Callout Proxy reports that an
 * asynchronous callout ended. All logic is in CalloutResultTriggerHandler.
 */
trigger CalloutResultTrigger on Callout_Result__e(after insert) {
  new CalloutResultTriggerHandler().handle(Trigger.new);
}
