/**
 * Example: keys and charges new Payment_Request__c records. All logic is in
 * PaymentRequestTriggerHandler.
 */
trigger PaymentRequestTrigger on Payment_Request__c(
  before insert,
  after insert
) {
  PaymentRequestTriggerHandler handler = new PaymentRequestTriggerHandler();
  if (Trigger.isBefore) {
    handler.beforeInsert(Trigger.new);
  } else {
    handler.afterInsert(Trigger.new);
  }
}
